#include "fdtable.h"

#include <pthread.h>
#include <sys/mman.h>

struct fd_slot *fd_dir[FD_MAX / FD_CHUNK];
static pthread_mutex_t fd_dir_lock = PTHREAD_MUTEX_INITIALIZER;

struct fd_slot *fd_slot_get(int fd)
{
	struct fd_slot *s = fd_lookup(fd);
	void *chunk;

	if (s || (unsigned)fd >= FD_MAX)
		return s;
	pthread_mutex_lock(&fd_dir_lock);
	if (!fd_dir[fd >> FD_CHUNK_BITS]) {
		/* mmap, not malloc: we may run inside the server's allocator. */
		chunk = mmap(NULL, sizeof(struct fd_slot) * FD_CHUNK, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (chunk != MAP_FAILED)
			__atomic_store_n(&fd_dir[fd >> FD_CHUNK_BITS], chunk, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&fd_dir_lock);
	return fd_lookup(fd);
}
