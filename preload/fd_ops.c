/* The kinds' tables (fd_ops.h): what the shim does with each kind of
 * descriptor, in one place. */
#include "fd_ops.h"

const struct fd_ops fd_kind_ops[FD_KINDS] = {
	[FD_UNKNOWN] = { 0 },
	[FD_RANDOM_DEVICE] = {
		.read = random_fd_read,
	},
	[FD_OTHER_LISTENER] = { 0 },
	[FD_APP_LISTENER] = {
		.waits = FD_WAIT_ACCEPT,
	},
	[FD_CLIENT] = {
		.read = client_fd_read,
		.poll_ready = client_fd_poll_ready,
		.write = client_fd_write,
		.close = client_fd_close,
		.waits = FD_WAIT_INPUT,
	},
	[FD_REPLAY] = {
		.read = replay_fd_read,
		.poll_ready = replay_fd_poll_ready,
		.write = replay_fd_write,
		.watched = replay_fd_watched,
		.close = replay_fd_close,
		.waits = FD_WAIT_INPUT,
	},
};
