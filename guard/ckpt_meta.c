/* A checkpoint's meta file ("key = number" lines) and the lines of its
 * SHA256SUMS; see checkpoint.h. */
#include <stdio.h>
#include <string.h>

#include "checkpoint.h"

int ckpt_meta_write(const struct ckpt_info *c, const char *dir)
{
	char path[PATH_MAX + 8];
	int n = snprintf(path, sizeof(path), "%s/meta", dir);
	FILE *f;

	if (n < 0 || (size_t)n >= sizeof(path))
		return -1;
	f = fopen(path, "we");
	if (!f)
		return -1;
	fprintf(f, "index = %llu\nview = %llu\nlog_pos = %llu\ntime_ms = %llu\npid = %d\n"
		   "image_bytes = %llu\ndata_bytes = %llu\ndump_ms = %llu\n",
		(unsigned long long)c->index, (unsigned long long)c->view,
		(unsigned long long)c->log_pos, (unsigned long long)c->time_ms, (int)c->pid,
		(unsigned long long)c->image_bytes, (unsigned long long)c->data_bytes,
		(unsigned long long)c->dump_ms);
	return fclose(f);
}

int ckpt_meta_read(struct ckpt_info *c)
{
	char path[PATH_MAX + 8], key[64];
	unsigned long long v;
	int seen = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/meta", c->dir);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fscanf(f, " %63s = %llu", key, &v) == 2) {
		seen++;
		if (!strcmp(key, "index"))
			c->index = v;
		else if (!strcmp(key, "view"))
			c->view = v;
		else if (!strcmp(key, "log_pos"))
			c->log_pos = v;
		else if (!strcmp(key, "time_ms"))
			c->time_ms = v;
		else if (!strcmp(key, "pid"))
			c->pid = (pid_t)v;
		else if (!strcmp(key, "image_bytes"))
			c->image_bytes = v;
		else if (!strcmp(key, "data_bytes"))
			c->data_bytes = v;
		else if (!strcmp(key, "dump_ms"))
			c->dump_ms = v;
	}
	fclose(f);
	return seen && c->pid > 0 ? 0 : -1;
}

int ckpt_sums_line(char *line, const char **name)
{
	line[strcspn(line, "\n")] = '\0';
	if (strlen(line) < 67 || line[64] != ' ')
		return -1;
	*name = line + 66;
	/* sum_tree writes paths under images/ and data/ only.  One that leaves
	 * the checkpoint (a damaged or forged file: "../x", "/dev/zero") would
	 * have restore hash whatever it names, a device for ever; found by
	 * fuzz_ckpt_sums. */
	if (**name == '/')
		return -1;
	for (const char *p = *name; p; p = strchr(p + 1, '/')) {
		const char *c = *p == '/' ? p + 1 : p;
		if (c[0] == '.' && c[1] == '.' && (c[2] == '/' || !c[2]))
			return -1;
	}
	return 0;
}
