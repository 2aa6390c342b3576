# apus — transparent replication of unmodified servers.
#
#   make [all]        build libapus.so, the apus CLI and the unit tests
#   make test         build and run every test (unit + bats)
#   make demo         a local 3-replica replicated Redis with a short workload
#   make bench        benchmarks (see BENCHMARKS.md)
#   make install      PREFIX=/usr/local DESTDIR=
#   V=1               show the commands;  SANITIZE=address|undefined|thread

CC ?= gcc
CFLAGS ?= -O2 -g
PREFIX ?= /usr/local
BUILD ?= build

override CFLAGS += -std=gnu11 -Wall -Wextra -Werror -Wno-unused-parameter \
	-fPIC -fvisibility=hidden -D_GNU_SOURCE -pthread
override LDFLAGS += -pthread
# libcrypto: peer admission (HMAC-SHA256); verbs + rdma_cm: the rdma transport.
CORE_LIBS := -Wl,--as-needed -lcrypto -libverbs -lrdmacm -Wl,--no-as-needed

ifneq ($(SANITIZE),)
override CFLAGS += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer
override LDFLAGS += -fsanitize=$(SANITIZE)
endif

ifeq ($(V),1)
Q :=
else
Q := @
endif

CORE_SRC := $(wildcard coordinator/*.c checker/*.c)
SHIM_SRC := $(wildcard preload/*.c)
CLI_SRC := $(wildcard guard/*.c)
UNIT_SRC := $(wildcard tests/unit/test_*.c)

CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/obj/%.o)
SHIM_OBJ := $(SHIM_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)

LIBCORE := $(BUILD)/lib/libapuscore.a
LIBAPUS := $(BUILD)/lib/libapus.so
CLI := $(BUILD)/bin/apus
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/unit/%)
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
	$(Q)$(CC) $(CFLAGS) -I. $(LDFLAGS) -o $@ $< $(LIBCORE) $(CORE_LIBS) -ldl

$(FIXTURE): tests/unit/fixture/fixture.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(CFLAGS) -shared $(LDFLAGS) -o $@ $<

# The C unit tests again under ThreadSanitizer (the shim's fixture test
# needs an uninstrumented libapus.so and is left to the plain build).
unit: $(UNIT_BIN)

test: all
	$(MAKE) --no-print-directory BUILD=$(BUILD)/tsan SANITIZE=thread unit
	bash tests/run.sh

demo: 
	bash scripts/demo.sh

bench: all $(BUILD)/bench/consensus
	bash scripts/bench.sh

install: $(LIBAPUS) $(CLI)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/apus
	install -m 0755 $(CLI) $(DESTDIR)$(PREFIX)/bin/apus
	install -m 0755 $(LIBAPUS) $(DESTDIR)$(PREFIX)/lib/apus/libapus.so

clean:
	rm -rf $(BUILD)

.PHONY: all unit test demo bench install clean

-include $(CORE_OBJ:.o=.d) $(SHIM_OBJ:.o=.d) $(CLI_OBJ:.o=.d)

BENCH_BIN := $(BUILD)/bench/consensus
$(BENCH_BIN): scripts/bench/consensus.c $(LIBCORE)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -I. $(LDFLAGS) -o $@ $< $(LIBCORE) $(CORE_LIBS)
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
bench-bin: $(BENCH_BIN) $(LOADGEN) $(FAILOVER) $(LISTAUDIT)
.PHONY: bench-bin
# The acknowledged-writes audit client (RPUSH positions); tests/bats/listaudit.bats.
$(LISTAUDIT): scripts/bench/listaudit.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $<
