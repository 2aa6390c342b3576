/* Whether a thread of this process is running or waiting.  A request that
 * holds the request order past its bound (thread_order = requests) loses
 * it only when its thread waits (a lock, a condition, the disk): a thread
 * that is merely slow, on a loaded machine, keeps it. */
#ifndef APUS_THREAD_STATE_H
#define APUS_THREAD_STATE_H

#include <stdint.h>

/* 1 when thread TID of this process is running or runnable (state R), 0
 * when it waits, is gone, or its state cannot be read. */
int thread_running(uint32_t tid);

/* The calling thread's id (gettid, asked once per thread). */
uint32_t thread_id(void);

#endif
