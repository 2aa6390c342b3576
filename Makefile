# apus — transparent replication of unmodified servers.
#
#   make [all]        build libapus.so, the apus CLI and the unit tests
#   make test         build and run every test (unit + bats; the unit tests
#                     also under TSan and under ASan+UBSan)
#   make test-asan    every test with libapus.so and the CLI under ASan+UBSan
#   make demo         a local 3-replica replicated Redis with a short workload
#   make bench        benchmarks (see BENCHMARKS.md)
#   make soak         the soaks (tests/soak/): minutes each
#   make redis-suite  Redis's own Tcl suite against an apus leader, digests
#                     compared after every unit (scripts/redis-suite.sh)
#   make install      PREFIX=/usr/local DESTDIR= (also SYSCONFDIR=/etc,
#                     SYSTEMD_UNIT_DIR, MANDIR, DOCDIR): the CLI, libapus.so,
#                     the systemd unit apus@.service, apus(1), the example
#                     config (into $(SYSCONFDIR)/apus/ only where absent)
#   make uninstall    the same variables; keeps a config the operator changed
#   make fuzz         each fuzz target (tests/fuzz/) built with clang's
#                     libFuzzer + ASan + UBSan into build/fuzz, run
#                     FUZZ_SECONDS (20) each, or FUZZ_RUNS executions each
#                     (FUZZ_TARGETS="a b": only those);
#                     fails on a crash (make test replays their corpora)
#   make fuzz-seeds   rewrites the seed corpora made by the real encoders
#   V=1               show the commands;  SANITIZE=address|undefined|thread

CC ?= gcc
CFLAGS ?= -O2 -g
PREFIX ?= /usr/local
BUILD ?= build

# -I.: every object includes the project's headers by their path from the
# root ("common/sys.h", "coordinator/storage/wal.h").
override CFLAGS += -std=gnu11 -Wall -Wextra -Werror -Wno-unused-parameter \
	-fPIC -fvisibility=hidden -D_GNU_SOURCE -pthread -I.
override LDFLAGS += -pthread
# libcrypto: peer admission (HMAC-SHA256); verbs + rdma_cm: the rdma transport.
CORE_LIBS := -Wl,--as-needed -lcrypto -libverbs -lrdmacm -Wl,--no-as-needed

ifneq ($(SANITIZE),)
# A sanitizer's finding fails the run (UBSan would print and go on).
override CFLAGS += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
override LDFLAGS += -fsanitize=$(SANITIZE)
endif

ifeq ($(V),1)
Q :=
else
Q := @
endif

# The layers (ARCHITECTURE.md, tests/bats/layers.bats): common/ below all,
# checker/ on common/, the coordinator's four folders above them; the shim
# (preload/) and the guard (guard/) on top, the CLI's commands (cli/) on the
# guard.
CORE_SRC := $(wildcard common/*.c checker/*.c coordinator/*/*.c)
SHIM_SRC := $(wildcard preload/*.c)
CLI_SRC := $(wildcard cli/*.c guard/*.c)
UNIT_SRC := $(wildcard tests/unit/test_*.c)

CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/obj/%.o)
SHIM_OBJ := $(SHIM_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)

LIBCORE := $(BUILD)/lib/libapuscore.a
LIBAPUS := $(BUILD)/lib/libapus.so
CLI := $(BUILD)/bin/apus
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/unit/%)
# Fuzz targets: tests/fuzz/fuzz_NAME.c, each also a unit test
# (test_fuzz_NAME) that replays tests/fuzz/{corpus,regress}/NAME.
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_NAMES := $(FUZZ_SRC:tests/fuzz/fuzz_%.c=%)
FUZZ_REPLAY := $(FUZZ_NAMES:%=$(BUILD)/tests/unit/test_fuzz_%)
# The guard's decoders that link without the CLI (cli/apus.c has main).
FUZZ_GUARD_SRC := guard/snapshot_wire.c guard/ckpt_meta.c
UNIT_BIN += $(FUZZ_REPLAY)
FIXTURE := $(BUILD)/tests/unit/libfixture.so

LOADGEN := $(BUILD)/bench/loadgen
LISTAUDIT := $(BUILD)/bench/listaudit

all: $(LIBAPUS) $(CLI) $(UNIT_BIN) $(FIXTURE) $(LOADGEN) $(LISTAUDIT)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIBCORE): $(CORE_OBJ)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(LIBAPUS): $(SHIM_OBJ) $(LIBCORE) preload/libapus.map
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared -Wl,--version-script=preload/libapus.map -Wl,-z,defs \
		$(LDFLAGS) -o $@ $(SHIM_OBJ) $(LIBCORE) $(CORE_LIBS) -ldl

$(CLI): $(CLI_OBJ) $(LIBCORE)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(LIBCORE) $(CORE_LIBS)

$(BUILD)/tests/unit/%: tests/unit/%.c $(LIBCORE) $(wildcard tests/unit/*.h)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(UNIT_OBJ) $(LIBCORE) $(CORE_LIBS) -ldl

# Unit tests of the shim's parts that are free of interposed calls link
# just those objects.
$(BUILD)/tests/unit/test_readahead_queue: UNIT_OBJ = $(BUILD)/obj/preload/order_queue.o
$(BUILD)/tests/unit/test_readahead_queue: $(BUILD)/obj/preload/order_queue.o
# Its fake server generator's seed function is found by dlsym.
$(BUILD)/tests/unit/test_input_random: override LDFLAGS += -rdynamic
# The CLI's config file writer, which needs nothing of the CLI else.
$(BUILD)/tests/unit/test_members: UNIT_OBJ = $(BUILD)/obj/cli/config_update.o
$(BUILD)/tests/unit/test_members: $(BUILD)/obj/cli/config_update.o

$(BUILD)/tests/unit/test_fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c tests/fuzz/fuzz.h \
		$(FUZZ_GUARD_SRC:%.c=$(BUILD)/obj/%.o) $(LIBCORE)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(CFLAGS) -DFUZZ_TARGET='"$*"' $(LDFLAGS) -o $@ $< tests/fuzz/replay.c \
		$(FUZZ_GUARD_SRC:%.c=$(BUILD)/obj/%.o) $(LIBCORE) $(CORE_LIBS) -ldl

$(FIXTURE): tests/unit/fixture/fixture.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(CFLAGS) -shared $(LDFLAGS) -o $@ $<

# The C unit tests again under ThreadSanitizer, and under AddressSanitizer
# with UndefinedBehaviorSanitizer (the shim's fixture test needs an
# uninstrumented libapus.so and is left to the plain build).
unit: $(UNIT_BIN)

# The sanitizer builds use every core (make test alone is not run with -j).
NPROC := $(shell nproc 2>/dev/null || echo 2)
test: all
	$(MAKE) --no-print-directory -j$(NPROC) BUILD=$(BUILD)/tsan SANITIZE=thread unit
	$(MAKE) --no-print-directory -j$(NPROC) BUILD=$(BUILD)/asan SANITIZE=address,undefined unit
	bash tests/run.sh

# make test, with every tcp-netns variant of the suites (tests/run.sh).
test-full:
	APUS_TEST_ALL_VARIANTS=1 $(MAKE) --no-print-directory test

# The whole suite (bats included) with libapus.so, the CLI and the unit
# tests built under AddressSanitizer and UndefinedBehaviorSanitizer: the
# servers run with the ASan runtime first in LD_PRELOAD (guard/spawn.c), and
# every report written (log_path) fails the suite that made it.  Leaks are
# not looked for here (servers are killed or exit holding memory by design);
# make test's unit run under ASan does look for them.  T=NAME: only files
# whose name contains NAME.
ASAN_DIR = $(abspath $(BUILD))/asan
test-asan: all
	$(MAKE) --no-print-directory BUILD=$(BUILD)/asan SANITIZE=address,undefined all
	rm -rf $(ASAN_DIR)/reports && mkdir -p $(ASAN_DIR)/reports
	APUS_BIN=$(ASAN_DIR)/bin/apus APUS_SANITIZER_LOG_DIR=$(ASAN_DIR)/reports \
	ASAN_OPTIONS=detect_leaks=0:log_path=$(ASAN_DIR)/reports/asan \
	UBSAN_OPTIONS=print_stacktrace=1:log_path=$(ASAN_DIR)/reports/ubsan \
	bash tests/run.sh $(T)

# libFuzzer builds with Debian's clang (+ libclang-rt-NN-dev), apart in
# build/fuzz; new inputs go to a scratch corpus, never into the tree.
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 20
# FUZZ_RUNS=N: N executions per target instead of a time limit.
FUZZ_LIMIT = $(if $(FUZZ_RUNS),-runs=$(FUZZ_RUNS),-max_total_time=$(FUZZ_SECONDS))
# FUZZ_TARGETS="entry config": only those.
FUZZ_TARGETS ?= $(FUZZ_NAMES)
FUZZ_BUILD := build/fuzz
FUZZ_FLAGS := -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -g -O1
FUZZ_CFLAGS := -std=gnu11 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -pthread -I.
FUZZ_LIB := $(FUZZ_BUILD)/libfuzzcore.a
FUZZ_BIN := $(FUZZ_NAMES:%=$(FUZZ_BUILD)/fuzz_%)

$(FUZZ_BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZCC  $<")
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,address,undefined \
		-fno-sanitize-recover=undefined -g -O1 -MMD -MP -c $< -o $@

$(FUZZ_LIB): $(CORE_SRC:%.c=$(FUZZ_BUILD)/obj/%.o) $(FUZZ_GUARD_SRC:%.c=$(FUZZ_BUILD)/obj/%.o)
	$(Q)rm -f $@ && ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(FUZZ_LIB)
	@$(if $(Q),echo "  FUZZLD  $@")
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_FLAGS) -o $@ $< $(FUZZ_LIB) $(CORE_LIBS) -ldl

# Rewrites the seed corpora that the real encoders make (tests/fuzz/seeds.c).
fuzz-seeds: $(FUZZ_GUARD_SRC:%.c=$(BUILD)/obj/%.o) $(LIBCORE)
	@mkdir -p $(BUILD)/tests/fuzz
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $(BUILD)/tests/fuzz/seeds tests/fuzz/seeds.c $^ $(CORE_LIBS)
	$(Q)$(BUILD)/tests/fuzz/seeds

fuzz-check:
	@command -v $(FUZZ_CC) >/dev/null || { echo "make fuzz: $(FUZZ_CC) is missing (apt-get install clang libclang-rt-14-dev)"; exit 2; }
	@echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' | \
		$(FUZZ_CC) -fsanitize=fuzzer -x c - -o /dev/null 2>/dev/null || \
		{ echo "make fuzz: $(FUZZ_CC) has no libFuzzer (apt-get install libclang-rt-14-dev)"; exit 2; }

fuzz: fuzz-check
	$(Q)$(MAKE) --no-print-directory $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)
	$(Q)for t in $(FUZZ_TARGETS); do \
		scratch=$(FUZZ_BUILD)/corpus/$$t; mkdir -p $$scratch $(FUZZ_BUILD)/crash/$$t; \
		echo "  FUZZ    $$t ($(FUZZ_LIMIT))"; \
		$(FUZZ_BUILD)/fuzz_$$t $(FUZZ_LIMIT) -timeout=10 -print_final_stats=1 \
			-artifact_prefix=$(FUZZ_BUILD)/crash/$$t/ $$scratch tests/fuzz/corpus/$$t \
			tests/fuzz/regress/$$t >$(FUZZ_BUILD)/$$t.log 2>&1 || \
			{ tail -n 40 $(FUZZ_BUILD)/$$t.log; echo "make fuzz: $$t crashed; the input is in $(FUZZ_BUILD)/crash/$$t/"; exit 1; }; \
		grep -E '^#[0-9]+.*DONE|^Done ' $(FUZZ_BUILD)/$$t.log | sed 's/^/          /'; \
	done

demo: 
	bash scripts/demo.sh

bench: all $(BUILD)/bench/consensus
	bash scripts/bench.sh

# The soaks (tests/soak/): minutes each, not part of make test.
# SOAK_RUNS=N repeats each file N times.
soak: all
	@runs=$${SOAK_RUNS:-1}; for i in $$(seq $$runs); do bats tests/soak/*.bats || exit 1; done

# Redis's own suite against the leader (fetches Debian's redis source once).
redis-suite: all
	bash scripts/redis-suite.sh

# Debian's layout with PREFIX=/usr: the config in /etc/apus, units in
# /lib/systemd/system; the data (/var/lib/apus) and pid files (/run/apus)
# are the unit's StateDirectory and RuntimeDirectory.
SYSCONFDIR ?= /etc
BINDIR ?= $(PREFIX)/bin
PKGLIBDIR ?= $(PREFIX)/lib/apus
MANDIR ?= $(PREFIX)/share/man
DOCDIR ?= $(PREFIX)/share/doc/apus
SYSTEMD_UNIT_DIR ?= $(if $(filter /usr,$(PREFIX)),/lib/systemd/system,$(PREFIX)/lib/systemd/system)
# The unit, the man page and the example config name the installed paths.
DIST_SUBST = sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' \
	-e 's|@PKGLIBDIR@|$(PKGLIBDIR)|g' -e 's|@DOCDIR@|$(DOCDIR)|g'
DIST_OUT := $(BUILD)/dist
CONF_EXAMPLES := redis.conf

install: $(LIBAPUS) $(CLI)
	@mkdir -p $(DIST_OUT)
	@$(if $(Q),echo "  GEN     $(DIST_OUT): apus@.service apus.1 $(CONF_EXAMPLES)")
	$(Q)$(DIST_SUBST) dist/systemd/apus@.service > $(DIST_OUT)/apus@.service
	$(Q)$(DIST_SUBST) doc/apus.1 > $(DIST_OUT)/apus.1
	$(Q)$(foreach f,$(CONF_EXAMPLES),$(DIST_SUBST) dist/etc/$(f) > $(DIST_OUT)/$(f) &&) true
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(PKGLIBDIR)/apps/redis \
		$(DESTDIR)$(SYSTEMD_UNIT_DIR) $(DESTDIR)$(MANDIR)/man1 \
		$(DESTDIR)$(DOCDIR)/examples $(DESTDIR)$(SYSCONFDIR)/apus
	install -m 0755 $(CLI) $(DESTDIR)$(BINDIR)/apus
	ln -sf apus $(DESTDIR)$(BINDIR)/apus-guard
	install -m 0755 $(LIBAPUS) $(DESTDIR)$(PKGLIBDIR)/libapus.so
	install -m 0755 apps/redis/snapshot.sh $(DESTDIR)$(PKGLIBDIR)/apps/redis/snapshot.sh
	install -m 0644 $(DIST_OUT)/apus@.service $(DESTDIR)$(SYSTEMD_UNIT_DIR)/apus@.service
	install -m 0644 $(DIST_OUT)/apus.1 $(DESTDIR)$(MANDIR)/man1/apus.1
	@# An operator's config is never overwritten.
	@for f in $(CONF_EXAMPLES); do \
		install -m 0644 $(DIST_OUT)/$$f $(DESTDIR)$(DOCDIR)/examples/$$f || exit 1; \
		if [ -e $(DESTDIR)$(SYSCONFDIR)/apus/$$f ]; then \
			echo "  KEEP    $(DESTDIR)$(SYSCONFDIR)/apus/$$f (the example is in $(DOCDIR)/examples)"; \
		else \
			install -m 0644 $(DIST_OUT)/$$f $(DESTDIR)$(SYSCONFDIR)/apus/$$f || exit 1; \
		fi; \
	done

# Removes what install put there; a config in $(SYSCONFDIR)/apus goes only
# when it is still the shipped example, and folders only when empty.
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/apus $(DESTDIR)$(BINDIR)/apus-guard \
		$(DESTDIR)$(PKGLIBDIR)/libapus.so $(DESTDIR)$(PKGLIBDIR)/apps/redis/snapshot.sh \
		$(DESTDIR)$(SYSTEMD_UNIT_DIR)/apus@.service $(DESTDIR)$(MANDIR)/man1/apus.1
	@for f in $(CONF_EXAMPLES); do \
		c=$(DESTDIR)$(SYSCONFDIR)/apus/$$f; e=$(DESTDIR)$(DOCDIR)/examples/$$f; \
		if [ -f "$$c" ] && [ -f "$$e" ] && cmp -s "$$c" "$$e"; then \
			rm -f "$$c"; \
		elif [ -e "$$c" ]; then \
			echo "  KEEP    $$c (changed since install)"; \
		fi; \
		rm -f "$$e"; \
	done
	@for d in $(PKGLIBDIR)/apps/redis $(PKGLIBDIR)/apps $(PKGLIBDIR) $(DOCDIR)/examples \
		$(DOCDIR) $(SYSCONFDIR)/apus; do \
		rmdir $(DESTDIR)$$d 2>/dev/null || true; \
	done

clean:
	rm -rf $(BUILD)

.PHONY: all unit test test-full test-asan demo bench soak redis-suite install uninstall clean fuzz fuzz-check fuzz-seeds

-include $(CORE_OBJ:.o=.d) $(SHIM_OBJ:.o=.d) $(CLI_OBJ:.o=.d) \
	$(wildcard $(FUZZ_BUILD)/obj/*/*.d $(FUZZ_BUILD)/obj/*/*/*.d)

BENCH_BIN := $(BUILD)/bench/consensus
$(BENCH_BIN): scripts/bench/consensus.c $(LIBCORE)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBCORE) $(CORE_LIBS)
# The benchmark client (redis, redis + WAIT, etcd); tests/bats/loadgen.bats.
$(LOADGEN): scripts/bench/loadgen.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< -lm
# The failover-time client (scripts/failover-bench.sh).
FAILOVER := $(BUILD)/bench/failover
$(FAILOVER): scripts/bench/failover.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $<
# What a clock read costs, bare and through the shim (scripts/clock-bench.sh).
CLOCKCOST := $(BUILD)/bench/clockcost
$(CLOCKCOST): scripts/bench/clockcost.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $<
bench-bin: $(BENCH_BIN) $(LOADGEN) $(FAILOVER) $(LISTAUDIT) $(CLOCKCOST)
.PHONY: bench-bin
# The acknowledged-writes audit client (RPUSH positions); tests/bats/listaudit.bats.
$(LISTAUDIT): scripts/bench/listaudit.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $<
