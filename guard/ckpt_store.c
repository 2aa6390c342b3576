/* The checkpoint store: where a node's checkpoints live
 * (<data_dir>/checkpoints/<id>/), their SHA256SUMS (written at nice 19,
 * verified before a restore), the list newest first, and pruning.  The
 * protocol that fills it (hold, dump, restore) is checkpoint.c; a
 * checkpoint's meta file is ckpt_meta.c.  Layout: checkpoint.h. */
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int ckpt_join_path(char *out, size_t len, const char *a, const char *b)
{
	int n = snprintf(out, len, "%s/%s", a, b);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

int ckpt_root(const struct apus_config *cfg, int node, char *out, size_t len)
{
	return config_node_path(cfg, node, CKPT_DIR, out, len);
}

/* --- SHA256SUMS --- */

static int sha256_file(const char *path, char hex[65], uint64_t *size)
{
	unsigned char buf[1 << 16], md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = -1;
	ssize_t n;

	*size = 0;
	if (fd < 0 || !ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL))
		goto out;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		EVP_DigestUpdate(ctx, buf, (size_t)n);
		*size += (uint64_t)n;
	}
	if (n < 0 || !EVP_DigestFinal_ex(ctx, md, &mdlen))
		goto out;
	for (unsigned i = 0; i < mdlen; i++)
		sprintf(hex + 2 * i, "%02x", md[i]);
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	EVP_MD_CTX_free(ctx);
	return rc;
}

/* Appends "<sha256>  <rel>" for every regular file under BASE/REL to OUT;
 * adds their sizes to *BYTES.  0 or -1. */
static int sum_tree(const char *base, const char *rel, FILE *out, uint64_t *bytes)
{
	char path[PATH_MAX], sub[PATH_MAX], hex[65];
	struct dirent *d;
	DIR *dir;
	int rc = 0;

	snprintf(path, sizeof(path), "%s/%s", base, rel);
	dir = opendir(path);
	if (!dir)
		return -1;
	while (!rc && (d = readdir(dir))) {
		struct stat st;
		uint64_t size;

		if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", rel, d->d_name);
		if (ckpt_join_path(path, sizeof(path), base, sub) || lstat(path, &st) < 0)
			rc = -1;
		else if (S_ISDIR(st.st_mode))
			rc = sum_tree(base, sub, out, bytes);
		else if (S_ISREG(st.st_mode)) {
			if (sha256_file(path, hex, &size) < 0)
				rc = -1;
			else {
				fprintf(out, "%s  %s\n", hex, sub);
				*bytes += size;
			}
		}
	}
	closedir(dir);
	return rc;
}

/* Writes SUMS for DIR's images/ and data/, in a child at nice 19 (like the
 * dump: the CPU the replicas leave); their sizes in *IMAGES and *DATA. */
int ckpt_write_sums(const char *dir, const char *sums, uint64_t *images, uint64_t *data)
{
	uint64_t sizes[2] = { 0, 0 };
	int pfd[2], st;
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		FILE *f = fopen(sums, "we");
		int rc;

		(void)!nice(19);
		rc = !f || sum_tree(dir, "images", f, &sizes[0]) || sum_tree(dir, "data", f, &sizes[1]);
		if (f && fclose(f))
			rc = 1;
		if (!rc && write(pfd[1], sizes, sizeof(sizes)) != sizeof(sizes))
			rc = 1;
		_exit(rc);
	}
	close(pfd[1]);
	ssize_t got = pid > 0 ? read(pfd[0], sizes, sizeof(sizes)) : -1;
	close(pfd[0]);
	if (pid < 0)
		return -1;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (got != sizeof(sizes) || !WIFEXITED(st) || WEXITSTATUS(st))
		return -1;
	*images = sizes[0];
	*data = sizes[1];
	return 0;
}

int ckpt_verify(const struct ckpt_info *c, char *why, size_t len)
{
	char path[PATH_MAX + 16], line[PATH_MAX + 80], hex[65];
	int files = 0, rc = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/SHA256SUMS", c->dir);
	f = fopen(path, "re");
	if (!f) {
		snprintf(why, len, "SHA256SUMS is missing");
		return -1;
	}
	while (!rc && fgets(line, sizeof(line), f)) {
		const char *name;
		uint64_t size;

		if (ckpt_sums_line(line, &name)) {
			snprintf(why, len, "SHA256SUMS is malformed");
			rc = -1;
			break;
		}
		if (ckpt_join_path(path, sizeof(path), c->dir, name) || sha256_file(path, hex, &size) < 0) {
			snprintf(why, len, "%s is missing or unreadable", name);
			rc = -1;
		} else if (strncmp(hex, line, 64)) {
			snprintf(why, len, "%s does not match its checksum", name);
			rc = -1;
		}
		files++;
	}
	fclose(f);
	if (!rc && !files) {
		snprintf(why, len, "SHA256SUMS lists no files");
		rc = -1;
	}
	return rc;
}

static int newest_first(const void *a, const void *b)
{
	const struct ckpt_info *x = a, *y = b;

	if (x->index != y->index)
		return x->index < y->index ? 1 : -1;
	return x->time_ms < y->time_ms ? 1 : x->time_ms > y->time_ms ? -1 : 0;
}

int ckpt_list(const struct apus_config *cfg, int node, struct ckpt_info *out, int max)
{
	char root[PATH_MAX];
	struct dirent *d;
	DIR *dir;
	int n = 0;

	if (ckpt_root(cfg, node, root, sizeof(root))) {
		errno = ENAMETOOLONG;
		return -1;
	}
	dir = opendir(root);
	if (!dir)
		return errno == ENOENT ? 0 : -1;
	while (n < max && (d = readdir(dir))) {
		struct ckpt_info *c = &out[n];

		if (d->d_name[0] == '.' || strlen(d->d_name) >= sizeof(c->id))
			continue;
		memset(c, 0, sizeof(*c));
		snprintf(c->id, sizeof(c->id), "%s", d->d_name);
		if (!ckpt_join_path(c->dir, sizeof(c->dir), root, d->d_name) && ckpt_meta_read(c) == 0)
			n++;
	}
	closedir(dir);
	qsort(out, (size_t)n, sizeof(*out), newest_first);
	return n;
}

int ckpt_remove_tree(const char *path)
{
	char *argv[] = { "rm", "-rf", "--", (char *)path, NULL };

	return ckpt_run(argv, NULL, NULL, RUN_BACKGROUND);
}

int ckpt_prune(const struct apus_config *cfg, int node, int keep)
{
	struct ckpt_info list[CKPT_MAX];
	int n = ckpt_list(cfg, node, list, CKPT_MAX), gone = 0;

	for (int i = keep; i < n; i++)
		if (ckpt_remove_tree(list[i].dir) == 0)
			gone++;
	return gone;
}
