# ZeroBubble MLIR: the two commands.
#   make test   install what is missing, build, run every test suite (ctest)
#   make demo   install what is missing, build, show the project at work

BUILD_DIR ?= build
BUILD_TYPE ?= Release
CMAKE ?= cmake

.PHONY: all deps configure build test demo clean

all: build

deps:
	@./utils/install-deps.sh

$(BUILD_DIR)/build.ninja:
	$(CMAKE) -G Ninja -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

configure: deps $(BUILD_DIR)/build.ninja

build: configure
	$(CMAKE) --build $(BUILD_DIR)

# Two suites at a time: the lit, e2e and Python suites each leave a core
# idle for much of their run (compiling one model, one process waiting on
# another).
CTEST_JOBS ?= 2

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(CTEST_JOBS)

demo: build
	@./utils/demo.sh $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR)
