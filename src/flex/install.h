/* SPDX-License-Identifier: Apache-2.0 */
/* Installing and removing a driver so that a watching prober never sees half of it: the
 * executable appears by one rename, and a folder disappears by one rename. */
#pragma once

/* Copies the executable src to <plugin_dir>/<vendor>~<name>/<name>: written to a dot-name in
 * that folder (created as needed, the plugin dir too), fsync'ed, mode 0755, renamed over
 * <name>, folder fsync'ed. vendor NULL or "" installs <plugin_dir>/<name>/<name>. Replacing a
 * running driver is safe: calls in progress keep the old file. Returns 0, or a negative errno
 * with *ret_error (may be NULL): -EINVAL bad vendor/name, -ENOENT/-EACCES src, others I/O. */
int flex_install(const char *plugin_dir, const char *vendor, const char *name, const char *src,
		 char **ret_error);

/* Removes <plugin_dir>/<vendor>~<name>: renamed to a dot-name (one removal event for a
 * watcher), then deleted. Returns 0, -ENOENT when not installed, -EINVAL for a bad name, or
 * another negative errno, with *ret_error (may be NULL). */
int flex_remove(const char *plugin_dir, const char *vendor, const char *name, char **ret_error);

/* path made absolute against the working directory, symlinks left as they are (a driver runs
 * by the path it was found at, as the kubelet runs it), leading "./" and trailing '/' dropped.
 * NULL when the working directory cannot be read. */
char *flex_path_absolute(const char *path);

/* Where a driver's executable is, for tools: driver is a driver name (vendor/name) looked up
 * in plugin_dir as the prober finds it, or a path (one starting with '/' or '.', or an
 * executable that is no driver of plugin_dir). Returns 0 with *ret_exe (flex_path_absolute():
 * a symlinked driver keeps its own name as argv[0]) and *ret_name (the driver name, or the
 * executable's file name for a path), or a negative errno with *ret_error (may be NULL): -EINVAL
 * for an invalid driver name, others when there is no executable. */
int flex_driver_locate(const char *plugin_dir, const char *driver, char **ret_exe, char **ret_name,
		       char **ret_error);
