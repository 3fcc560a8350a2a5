# Strata developer tasks. `just --list` is the map; recipes call Go or CMake, and target
# lists live in Go (kernels/), never here.

set shell := ["bash", "-euo", "pipefail", "-c"]

# List the recipes.
default:
    @just --list

# Render kernels/out and kernels/abi from the Target and Spec tables.
[group('gen')]
gen:
    go generate ./...

# Fail, naming the files, if the committed generated files are stale.
[group('gen')]
gen-check:
    go run ./gen -check

# Compile every (target, family) source into build/co/<target>/ (AMD .co, NVIDIA .ptx).
[group('build')]
co:
    cmake -S ctest -B build/ctest -G Ninja > /dev/null
    cmake --build build/ctest -- -k 0

# gofmt and go vet over the whole module.
[group('test')]
lint:
    @files="$(gofmt -l .)"; if [ -n "$files" ]; then echo "gofmt -w needed:"; echo "$files"; exit 1; fi
    go vet ./...

# Every Go test (GPU tests skip without a GPU).
[group('test')]
test:
    go test ./...

# Build the code objects and check each one: compiled, promised instruction, no scratch, budgets.
[group('gpu')]
ctest: co
    ctest --test-dir build/ctest -j "$(nproc)" --output-on-failure

# Every kernel against its float64 reference on this machine's GPU (fails without one).
[group('gpu')]
parity: co
    STRATA_REQUIRE_GPU=1 STRATA_CO_DIR="$PWD/build/co" go test ./parity -v

# Debian's HIP runtime library is required in CI so the HIP binding's whole symbol table is resolved.
# Everything CI runs: lint, generated files up to date, Go tests, code objects and their checks.
[group('test')]
ci: lint gen-check
    STRATA_REQUIRE_HIP_LIBRARY=1 go test -timeout 25m ./...
    go test -tags strata_nodemo -run NoDemo ./models/demo ./cmd/strata-run
    just ctest
