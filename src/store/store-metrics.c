/* SPDX-License-Identifier: Apache-2.0 */
/* The snapshot store's metrics (volplug_store_*): counted where they happen, by every Store of
 * the process alike, so they are the whole volplugd's. Bytes and chunks count as each chunk is
 * done (a long upload shows its progress; a failed one what it sent); uploads, restores and
 * collections count when they end. The last error of each kind is kept with its message for
 * volplugctl status, and shown as a gauge: its time, labelled with the errno's name. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "metrics.h"
#include "store-internal.h"

METRIC_DEFINE(
	read_bytes, METRIC_COUNTER, "volplug_store_read_bytes_total",
	"Bytes of snapshots read to upload them to the snapshot store (allocated ranges only)");
METRIC_DEFINE(sent_bytes, METRIC_COUNTER, "volplug_store_sent_bytes_total",
	      "Compressed bytes of chunks put into the snapshot store");
METRIC_DEFINE(chunks, METRIC_COUNTER, "volplug_store_upload_chunks_total",
	      "Chunks of uploads by what became of them: sent, skipped (the store held it "
	      "already), zero (all zeros: left out as a hole)",
	      "outcome");
METRIC_DEFINE(uploads_running, METRIC_GAUGE, "volplug_store_uploads_in_progress",
	      "Uploads of snapshots to the snapshot store running now");
METRIC_DEFINE(uploads, METRIC_COUNTER, "volplug_store_uploads_total",
	      "Uploads of snapshots to the snapshot store that ended, by result: done, failed "
	      "(an attempt; it may be retried), cancelled (its snapshot deleted, or volplugd "
	      "stopping)",
	      "result");
METRIC_DEFINE(restores_running, METRIC_GAUGE, "volplug_store_restores_in_progress",
	      "Restores from the snapshot store running now");
METRIC_DEFINE(restores, METRIC_COUNTER, "volplug_store_restores_total",
	      "Restores from the snapshot store that ended, by result: done, failed", "result");
METRIC_DEFINE(restore_received, METRIC_COUNTER, "volplug_store_restore_received_bytes_total",
	      "Compressed bytes of chunks restores got from the snapshot store");
METRIC_DEFINE(restore_written, METRIC_COUNTER, "volplug_store_restore_written_bytes_total",
	      "Bytes restores wrote into volumes from the snapshot store");
METRIC_DEFINE(collections, METRIC_COUNTER, "volplug_store_collections_total",
	      "Collections of the snapshot store's unused chunks, by result: done, put_off (an "
	      "upload was in progress), failed",
	      "result");
METRIC_DEFINE(collected, METRIC_COUNTER, "volplug_store_collected_chunks_total",
	      "Chunks collections deleted from the snapshot store (named by no snapshot)");
METRIC_DEFINE_FULL(last_error, METRIC_GAUGE, "volplug_store_last_error_timestamp_seconds",
		   "When the last error of each kind (upload, restore, collection) happened, in "
		   "seconds since the epoch, labelled with its errno",
		   true, NULL, 0, "kind", "error");

static const char *const kind_names[_STORE_ERROR_KIND_MAX] = {
	[STORE_ERROR_UPLOAD] = "upload",
	[STORE_ERROR_RESTORE] = "restore",
	[STORE_ERROR_COLLECTION] = "collection",
};

typedef struct LastError {
	int error;   /* 0: none yet */
	usec_t when; /* CLOCK_REALTIME */
	char *message;
} LastError;

static pthread_mutex_t errors_lock = PTHREAD_MUTEX_INITIALIZER; /* guards errors */
static LastError errors[_STORE_ERROR_KIND_MAX];

static const char *errno_name(int e)
{
	const char *n = strerrorname_np(e);
	return n ?: "unknown";
}

static void collect_errors(void *userdata)
{
	(void)userdata;
	pthread_mutex_lock(&errors_lock);
	for (size_t k = 0; k < _STORE_ERROR_KIND_MAX; k++)
		if (errors[k].error)
			metric_set(&last_error, (double)errors[k].when / USEC_PER_SEC,
				   kind_names[k], errno_name(-errors[k].error));
	pthread_mutex_unlock(&errors_lock);
}

static void init_once(void)
{
	/* Every series from the start at 0, so that rate() sees the first one. */
	metric_add(&chunks, 0, "sent");
	metric_add(&chunks, 0, "skipped");
	metric_add(&chunks, 0, "zero");
	metric_add(&uploads, 0, "done");
	metric_add(&uploads, 0, "failed");
	metric_add(&uploads, 0, "cancelled");
	metric_set(&uploads_running, 0);
	metric_add(&restores, 0, "done");
	metric_add(&restores, 0, "failed");
	metric_set(&restores_running, 0);
	metric_add(&collections, 0, "done");
	metric_add(&collections, 0, "put_off");
	metric_add(&collections, 0, "failed");
	metric_add(&read_bytes, 0);
	metric_add(&sent_bytes, 0);
	metric_add(&restore_received, 0);
	metric_add(&restore_written, 0);
	metric_add(&collected, 0);
	metrics_collector_add(collect_errors, NULL);
}

void store_metrics_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, init_once);
}

void store_count_error(StoreErrorKind kind, int r, const char *message)
{
	if (r >= 0 || kind < 0 || kind >= _STORE_ERROR_KIND_MAX)
		return;
	pthread_mutex_lock(&errors_lock);
	free(errors[kind].message);
	errors[kind] = (LastError){
		.error = r,
		.when = now_usec(CLOCK_REALTIME),
		.message = xstrdup(message ?: strerror(-r)),
	};
	pthread_mutex_unlock(&errors_lock);
}

int store_last_error(StoreErrorKind kind, usec_t *ret_when, char **ret_message)
{
	int r = 0;

	if (kind < 0 || kind >= _STORE_ERROR_KIND_MAX)
		return 0;
	pthread_mutex_lock(&errors_lock);
	if (errors[kind].error) {
		r = errors[kind].error;
		*ret_when = errors[kind].when;
		*ret_message = xstrdup(errors[kind].message);
	}
	pthread_mutex_unlock(&errors_lock);
	return r;
}

const char *store_error_kind_to_string(StoreErrorKind kind)
{
	return kind >= 0 && kind < _STORE_ERROR_KIND_MAX ? kind_names[kind] : NULL;
}

void store_count_chunk(uint64_t read, bool zero, bool sent, uint64_t sent_len)
{
	metric_add(&read_bytes, (double)read);
	if (zero)
		metric_inc(&chunks, "zero");
	else if (sent) {
		metric_inc(&chunks, "sent");
		metric_add(&sent_bytes, (double)sent_len);
	} else
		metric_inc(&chunks, "skipped");
}

void store_count_upload_start(void)
{
	metric_add(&uploads_running, 1);
}

void store_count_upload_end(int r, const char *message)
{
	metric_add(&uploads_running, -1);
	metric_inc(&uploads, r == 0 ? "done" : r == -ECANCELED ? "cancelled" : "failed");
	if (r != -ECANCELED)
		store_count_error(STORE_ERROR_UPLOAD, r, message);
}

void store_count_restore_start(void)
{
	metric_add(&restores_running, 1);
}

void store_count_restore_chunk(uint64_t received, uint64_t written)
{
	metric_add(&restore_received, (double)received);
	metric_add(&restore_written, (double)written);
}

void store_count_restore(int r, const char *message)
{
	metric_add(&restores_running, -1);
	metric_inc(&restores, r == 0 ? "done" : "failed");
	store_count_error(STORE_ERROR_RESTORE, r, message);
}

void store_count_collection(int r, uint64_t chunks_deleted, const char *message)
{
	metric_add(&collected, (double)chunks_deleted);
	metric_inc(&collections, r == 0 ? "done" : r == -EBUSY ? "put_off" : "failed");
	if (r != -EBUSY)
		store_count_error(STORE_ERROR_COLLECTION, r, message);
}
