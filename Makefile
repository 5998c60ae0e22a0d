# lotus build.  Plain make; dependencies come from pkg-config.
#   make            build bin/lotus and every test program
#   make run        install missing packages, build, run YCSB on a local cluster
#   make test       install missing packages, build, run the whole suite
#   make asan       build with ASan+UBSan into build-asan/ (tests: make test-asan)
#   make tsan       build with TSan into build-tsan/
# Every source under src/<module>/ goes into liblotus.a except src/cli/, which
# is the `lotus` command.  Every tests/unit/*.c is one test program.

BUILD   ?= build
CC      ?= cc
PKGS    := ucx liburing
OPTFLAGS ?= -O2 -g
CFLAGS  += -std=gnu11 -D_GNU_SOURCE $(OPTFLAGS) -Wall -Wextra -Wno-unused-parameter \
           -Wno-missing-field-initializers -fno-strict-aliasing -pthread \
           -Iinclude -Isrc $(shell pkg-config --cflags $(PKGS) 2>/dev/null) \
           -MMD -MP
ifneq ($(CI),)
CFLAGS  += -Werror
endif
ifneq ($(WERROR),)
CFLAGS  += -Werror
endif
LDLIBS  += $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lucp -lucs -luring) \
           -laio -lm -lpthread

LIB_SRC  := $(sort $(wildcard src/common/*.c src/net/*.c src/io/*.c src/store/*.c \
            src/lock/*.c src/memserver/*.c src/compute/*.c src/bench/*.c \
            src/serve/*.c))
CLI_SRC  := $(sort $(wildcard src/cli/*.c))
TEST_SRC := $(sort $(wildcard tests/unit/*.c))

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
LIB      := $(BUILD)/liblotus.a
LOTUS    := $(BUILD)/bin/lotus
# The serializability checker's workload client (tests/checker/, docs/checker.md).
LA_CLIENT := $(BUILD)/bin/la-client

.PHONY: all deps run test asan tsan test-asan clean
all: $(LOTUS) $(TEST_BIN) $(LA_CLIENT)

deps:
	@scripts/deps.sh

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@rm -f $@
	ar rcs $@ $^

$(LOTUS): $(CLI_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(CLI_OBJ) $(LIB) $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

$(LA_CLIENT): $(BUILD)/tests/checker/la_client.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# The main job: YCSB workload A on an embedded two-memory-server cluster.
run: deps
	@$(MAKE) --no-print-directory all
	UCX_TLS=$${UCX_TLS:-tcp} $(LOTUS) ycsb --local 2 --workload A --records 100000 --seconds 10

test: deps
	@$(MAKE) --no-print-directory all
	@LOTUS_BUILD=$(BUILD) tests/run

asan:
	@$(MAKE) --no-print-directory BUILD=build-asan \
	  OPTFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer" \
	  LDLIBS_EXTRA= all

test-asan: deps asan
	@LOTUS_BUILD=build-asan ASAN_OPTIONS=detect_leaks=0 tests/run

tsan:
	@$(MAKE) --no-print-directory BUILD=build-tsan CC=clang \
	  OPTFLAGS="-O1 -g -fsanitize=thread" all

clean:
	rm -rf build build-asan build-tsan

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(BUILD)/tests/checker/la_client.d $(TEST_BIN:$(BUILD)/tests/%=$(BUILD)/tests/unit/%.d)
