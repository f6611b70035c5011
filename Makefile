# The two commands a user needs: `make run` and `make test`. Both install missing Debian
# packages first (scripts/install-deps) and build with meson + ninja.
BUILD ?= build
ASAN_BUILD ?= build-asan
POOL ?= $(CURDIR)/pool
ENDPOINT ?= unix://$(CURDIR)/volplug.sock
FLEXVOLUME_DIR ?= $(CURDIR)/flexvolume
IMAGE ?= $(BUILD)/image

ARGS ?=

.PHONY: all deps image-deps build run test test-fast asan image format check-format clean

all: build

deps:
	@./scripts/install-deps

image-deps:
	@./scripts/install-deps --image

$(BUILD)/build.ninja:
	meson setup $(BUILD) --werror

$(ASAN_BUILD)/build.ninja:
	meson setup $(ASAN_BUILD) --werror -Db_sanitize=address,undefined -Db_lundef=false

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

asan: deps $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD)

# volplugd serving every CSI service on a pool in ./pool, socket ./volplug.sock, Flexvolume
# drivers from ./flexvolume.
run: build
	./$(BUILD)/src/cmd/volplugd all --endpoint $(ENDPOINT) --pool $(POOL) \
		--flexvolume-dir $(FLEXVOLUME_DIR) $(ARGS)


# The volplug image from Debian's packages, pinned by deploy/container/*.lock: an OCI layout
# in $(IMAGE)/oci and the same as one archive, $(IMAGE)/volplug-VERSION.oci.tar. As root.
image: image-deps
	deploy/container/build-image $(IMAGE)

# Everything: format check, unit + integration tests (the image's run test among them: the
# image is built first, going on with Debian's updates past its pin), then all again under
# ASan+UBSan.
test: build asan image-deps
	@rc=0; \
	./scripts/check-format >$(BUILD)/format.tap 2>&1 || rc=1; cat $(BUILD)/format.tap; \
	echo "building the image (log: $(BUILD)/image.log)"; \
	IMAGE_LOCK=warn deploy/container/build-image $(IMAGE) >$(BUILD)/image.log 2>&1 || \
		{ tail -20 $(BUILD)/image.log; }; \
	VOLPLUG_REQUIRE_IMAGE=1 meson test -C $(BUILD) --print-errorlogs --num-processes 2 || rc=1; \
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		meson test -C $(ASAN_BUILD) --print-errorlogs --num-processes 2 --timeout-multiplier 3 || rc=1; \
	./scripts/test-summary.py $(BUILD)/meson-logs/testlog.json $(ASAN_BUILD)/meson-logs/testlog.json \
		--tap $(BUILD)/format.tap || rc=1; \
	exit $$rc

# The plain build only: quicker while developing.
test-fast: build
	meson test -C $(BUILD) --print-errorlogs; ./scripts/test-summary.py $(BUILD)/meson-logs/testlog.json

format:
	git ls-files '*.c' '*.h' | xargs clang-format -i

check-format:
	./scripts/check-format

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
