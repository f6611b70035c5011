/* SPDX-License-Identifier: Apache-2.0 */
#include <dlfcn.h>
#include <errno.h>

#include "alloc.h"
#include "dlopen-util.h"
#include "error-util.h"

static int load(DlLibrary *lib, char **ret_error)
{
	/* RTLD_LOCAL: its symbols are ours through the table only, not another library's. */
	void *h = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return errorf(ret_error, -ENOENT, "cannot load %s: %s", lib->soname, dlerror());
	for (size_t i = 0; i < lib->n_syms; i++) {
		void *fn = dlsym(h, lib->syms[i].name);
		if (!fn) /* it stays loaded: a table half filled is never used */
			return errorf(ret_error, -ENOSYS, "%s has no %s", lib->soname,
				      lib->syms[i].name);
		*lib->syms[i].fn = fn;
	}
	return 0;
}

int dl_library_load(DlLibrary *lib, char **ret_error)
{
	int r;

	if (__atomic_load_n(&lib->loaded, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&lib->lock);
	if (!lib->tried) {
		lib->result = load(lib, &lib->error);
		lib->tried = true;
		if (lib->result == 0)
			__atomic_store_n(&lib->loaded, true, __ATOMIC_RELEASE);
	}
	r = lib->result;
	if (r < 0 && ret_error)
		errorf(ret_error, r, "%s", lib->error);
	pthread_mutex_unlock(&lib->lock);
	return r;
}
