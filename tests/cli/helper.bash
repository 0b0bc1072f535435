# Shared by the CLI tests: where the program and the stand-in NVML are, and a
# scratch folder per test. `make test` exports VISDEV, MOCK_NVML_DIR and SHIM_DIR.
bats_require_minimum_version 1.5.0
export LC_ALL=C
VISDEV=${VISDEV:-$BATS_TEST_DIRNAME/../../build/visdev}
MOCK_NVML_DIR=${MOCK_NVML_DIR:-$BATS_TEST_DIRNAME/../../build/tests/mock-nvml}
SHIM_DIR=${SHIM_DIR:-$BATS_TEST_DIRNAME/../../build/tests/shim}
FIXTURES=$BATS_TEST_DIRNAME/../fixtures

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	unset CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER NVIDIA_VISIBLE_DEVICES
	unset VISDEV_FIXTURE VISDEV_NVML_LIB VISDEV_CUDA_LIB MOCK_NVML_FIXTURE VISDEV_LEASE
	# a machine without a driver, whatever this one has
	export VISDEV_NVML_LIB=$BATS_TEST_TMPDIR/no-such-libnvidia-ml.so.1
	export VISDEV_LEASE_DIR=$BATS_TEST_TMPDIR/leases
	export XDG_CACHE_HOME=$BATS_TEST_TMPDIR/cache XDG_STATE_HOME=$BATS_TEST_TMPDIR/state
}

# visdev through the stand-in NVML serving fixture $1 (and its libcuda for the order).
mock() {
	local fixture=$1
	shift
	MOCK_NVML_FIXTURE=$fixture VISDEV_CUDA_LIB=$MOCK_NVML_DIR/libcuda.so.1 \
		"$VISDEV" --nvml-lib "$MOCK_NVML_DIR/libnvidia-ml.so.1" "$@"
}

# Fails with the output shown unless $output contains $1.
assert_output_has() {
	if [[ "$output" != *"$1"* ]]; then
		printf 'expected to find: %s\nin output:\n%s\n' "$1" "$output" >&2
		return 1
	fi
}

assert_status() {
	if [ "$status" -ne "$1" ]; then
		printf 'expected exit %s, got %s; output:\n%s\n' "$1" "$status" "$output" >&2
		return 1
	fi
}

# Waits up to 10 s for a command to succeed; fails (never hangs) otherwise.
wait_for() {
	for _ in $(seq 100); do
		"$@" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "timed out waiting for: $*" >&2
	return 1
}

# Whether process $1 has ended: gone, or a zombie nobody has reaped yet.
gone() {
	local state
	state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 0
	[ -z "$state" ] || [ "$state" = Z ] || [ "$state" = X ]
}

# Two real Unix users, visdev-alice and visdev-bob, for the rules about other
# users: created when the tests run as root (as CI does); otherwise the test
# is skipped, and says why. Points VISDEV_LEASE_DIR at a directory both can
# reach (root's, mode 1777), and works from the folder above it.
two_users() {
	[ "$(id -u)" -eq 0 ] || skip "needs root to create two Unix users (CI runs as root)"
	for u in visdev-alice visdev-bob; do
		id "$u" >/dev/null 2>&1 ||
			useradd --system --user-group --no-create-home --shell /bin/sh "$u" ||
			skip "cannot create the Unix user $u"
	done
	SHARED=$(mktemp -d /tmp/visdev-shared.XXXXXX)
	chmod 755 "$SHARED"
	cp "$FIXTURES"/*.json "$SHARED/"
	chmod 644 "$SHARED"/*.json
	# as an administrator sets one up: owned by root, shared by all
	install -d -m 1777 "$SHARED/leases" "$SHARED/cache"
	# what the lease audit keeps is each user's own, as in their homes
	for u in visdev-alice visdev-bob; do
		install -d -m 700 -o "$u" "$SHARED/state-$u"
	done
	export VISDEV_LEASE_DIR=$SHARED/leases XDG_CACHE_HOME=$SHARED/cache
	cd "$SHARED" || return 1
}

# Runs a command as user $1 (visdev-alice or visdev-bob), environment kept;
# in place of the shell that calls it, so that `as_user ... &` gives $! the
# command's own pid.
as_user() {
	local u=$1
	shift
	XDG_STATE_HOME=$SHARED/state-$u exec setpriv --reuid="$u" --regid="$u" --clear-groups -- "$@"
}

# What two_users made, undone: their processes killed, the shared folder removed.
two_users_cleanup() {
	if [ -n "${SHARED:-}" ]; then
		pkill -KILL -u visdev-alice 2>/dev/null
		pkill -KILL -u visdev-bob 2>/dev/null
		rm -rf "$SHARED"
	fi
	return 0
}

teardown() {
	two_users_cleanup
}
