#!/bin/sh
# Why a gerbera web UI session id differs between replicas: libuuid's
# uuid_generate() (util-linux 2.38, Debian 12) XORs the getrandom() bytes
# with random() and with jrand48() seeded from getpid(), getppid(), the
# thread id and the clock.  apus makes getrandom(), random() and rand()
# the same on every replica, not jrand48().  This builds a stub that makes
# those three constant, as apus does, and runs uuid_generate() in three
# processes: three different UUIDs.  With jrand48() constant too: three
# equal ones.  Needs gcc and uuid-dev.
set -eu
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
cat >"$t/stub.c" <<'C'
#include <string.h>
#include <sys/types.h>
ssize_t getrandom(void *b, size_t n, unsigned f) { (void)f; memset(b, 0x5a, n); return (ssize_t)n; }
long random(void) { return 12345; }
int rand(void) { return 12345; }
#ifdef JRAND
long jrand48(unsigned short x[3]) { (void)x; return 777; }
#endif
C
printf '#include <stdio.h>\n#include <uuid/uuid.h>\nint main(void){uuid_t u;char s[37];uuid_generate(u);uuid_unparse(u,s);puts(s);return 0;}\n' >"$t/u.c"
gcc -shared -fPIC -o "$t/stub.so" "$t/stub.c"
gcc -DJRAND -shared -fPIC -o "$t/stub2.so" "$t/stub.c"
gcc -o "$t/u" "$t/u.c" -luuid
echo "getrandom, random, rand constant:"
for _ in 1 2 3; do LD_PRELOAD=$t/stub.so "$t/u"; done
echo "jrand48 constant too:"
for _ in 1 2 3; do LD_PRELOAD=$t/stub2.so "$t/u"; done
