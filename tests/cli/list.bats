#!/usr/bin/env bats
# visdev list: the table, --json, the backends, and every bad input.

load helper

@test "list --demo shows the four GPUs of the guide, numbered fastest first" {
	run "$VISDEV" --demo list
	assert_status 0
	assert_output_has "Tesla V100-SXM2-32GB"
	assert_output_has "Tesla P100-PCIE-16GB"
	assert_output_has "NVIDIA GeForce RTX 2080 Ti"
	# CUDA's default order puts the RTX 3090 (GPU 2) first
	[[ "$(grep 'RTX 3090' <<<"$output")" == *"cuda:0" ]]
	[[ "$(grep 'V100' <<<"$output")" == *"cuda:1" ]]
	assert_output_has "CUDA_VISIBLE_DEVICES is unset: CUDA sees all 4 GPUs"
}

@test "list --json has every key of the contract, unknown values as null" {
	run "$VISDEV" --fixture "$FIXTURES/mixed.json" list --json
	assert_status 0
	keys=$(jq -c '.gpus[0] | keys_unsorted' <<<"$output")
	for k in index uuid name pci_bus_id memory_total_mib memory_used_mib memory_free_mib \
		utilization_gpu temperature_c power_w numa_node processes mig cuda; do
		jq -e --arg k "$k" '.gpus[] | has($k)' <<<"$output" >/dev/null ||
			{ echo "missing key $k in $keys"; return 1; }
	done
	jq -e 'has("driver_version") and has("cuda_driver_version")' <<<"$output"
	# mixed.json leaves some measurements out: they are null, never 0
	[ "$(jq '[.gpus[] | .temperature_c, .power_w, .utilization_gpu, .memory_used_mib,
		.numa_node | select(. == null)] | length' <<<"$output")" -gt 0 ]
	# free is total minus used wherever both are known
	jq -e '[.gpus[] | select(.memory_total_mib != null)
		| .memory_free_mib == .memory_total_mib - .memory_used_mib] | all' <<<"$output"
}

@test "list --json matches the fixture's values" {
	run "$VISDEV" --demo list --json
	assert_status 0
	[ "$(jq -r '.gpus[2].name' <<<"$output")" = "NVIDIA GeForce RTX 3090" ]
	[ "$(jq -r '.gpus[0].memory_total_mib' <<<"$output")" = 32768 ]
	[ "$(jq -r '.gpus[0].processes[0].pid' <<<"$output")" = 31842 ]
	[ "$(jq -r '.gpus[1].processes | length' <<<"$output")" = 0 ]
	[ "$(jq -r '.driver_version' <<<"$output")" = 535.183.01 ]
	[ "$(jq -c '[.gpus[].cuda]' <<<"$output")" = "[1,3,0,2]" ]
}

@test "list shows which cuda:N each GPU is under the environment" {
	CUDA_VISIBLE_DEVICES=2,1 CUDA_DEVICE_ORDER=PCI_BUS_ID run "$VISDEV" --demo list --json
	assert_status 0
	[ "$(jq -c '[.gpus[].cuda]' <<<"$output")" = "[null,1,0,null]" ]
	CUDA_VISIBLE_DEVICES=2,1 CUDA_DEVICE_ORDER=PCI_BUS_ID run "$VISDEV" --demo list
	[[ "$(grep 'RTX 3090' <<<"$output")" == *"cuda:0" ]]
	[[ "$(grep 'V100' <<<"$output")" == *"hidden" ]]
	assert_output_has "CUDA_VISIBLE_DEVICES=2,1: CUDA sees 2 of 4 GPUs"
}

@test "global options work before and after the command, and from the environment" {
	run "$VISDEV" --demo --json list
	before=$output
	run "$VISDEV" list --json --demo
	[ "$output" = "$before" ]
	VISDEV_FIXTURE=$FIXTURES/mixed.json run "$VISDEV" list --json
	assert_status 0
	direct=$("$VISDEV" --fixture "$FIXTURES/mixed.json" list --json)
	[ "$output" = "$direct" ]
}

@test "list with MIG instances shows them under their GPU" {
	run "$VISDEV" --fixture "$FIXTURES/mig.json" list
	assert_status 0
	assert_output_has "MIG "
	assert_output_has "MIG-"
	run "$VISDEV" --fixture "$FIXTURES/mig.json" list --json
	[ "$(jq '[.gpus[].mig | length] | add' <<<"$output")" -ge 2 ]
}

@test "a MIG device's ids are never negative, an unknown profile is null, and power prints to the milliwatt" {
	jq '.gpus[1].mig[0].gi = 4294967295 | .gpus[1].mig[0].ci = 3000000000
		| del(.gpus[1].mig[0].profile) | .gpus[0].power_w = 26.8' \
		"$FIXTURES/engine.json" >big.json
	run "$VISDEV" --fixture big.json list --json
	assert_status 0
	[ "$(jq -c '.gpus[1].mig[0] | [.gi, .ci, .profile]' <<<"$output")" = '[4294967295,3000000000,null]' ]
	grep -q '"power_w": 26.8,' <<<"$output"
	run "$VISDEV" --fixture big.json map --json MIG-5e1f0a2b
	[ "$(jq -c '.devices[0] | [.gi, .ci, .profile]' <<<"$output")" = '[4294967295,3000000000,null]' ]
}

@test "list's CUDA column follows the MIG rules: one cuda:N, the rest dropped" {
	# driver 550, unset: the first MIG device alone; the other GPU is not enumerated
	run "$VISDEV" --fixture "$FIXTURES/mig.json" list --json
	assert_status 0
	[ "$(jq -c '[.gpus[0].mig[].cuda]' <<<"$output")" = '[0,null,null]' ]
	[ "$(jq -c '[.gpus[].cuda]' <<<"$output")" = '[null,null]' ]
	run "$VISDEV" --fixture "$FIXTURES/mig.json" list
	[ "$(grep -c 'cuda:' <<<"$output")" -eq 1 ]
	[ "$(grep -c 'dropped$' <<<"$output")" -eq 3 ]
	assert_output_has "CUDA sees 1 of 4 devices"
	CUDA_VISIBLE_DEVICES=1 run "$VISDEV" --fixture "$FIXTURES/mig.json" list
	[[ "$(grep '^  1 ' <<<"$output")" == *"cuda:0" ]]
}

@test "list points out a misspelt variable" {
	CUDA_VISBLE_DEVICES=0 run "$VISDEV" --demo list
	assert_status 0
	assert_output_has "CUDA_VISBLE_DEVICES"
	assert_output_has "misspelling of 'CUDA_VISIBLE_DEVICES'"
}

@test "without a driver list says so, names the library and suggests --demo" {
	run "$VISDEV" list
	assert_status 3
	assert_output_has "no NVIDIA driver found"
	assert_output_has "no-such-libnvidia-ml.so.1"
	assert_output_has "--demo"
}

@test "a missing fixture is one line naming the file, exit 1" {
	run "$VISDEV" --fixture nowhere.json list
	assert_status 1
	[ "${#lines[@]}" -eq 1 ]
	assert_output_has "nowhere.json"
}

@test "every malformed fixture is one line with file, line and column, exit 1" {
	n=0
	for f in "$FIXTURES"/bad/*.json; do
		run "$VISDEV" --fixture "$f" list
		[ "$status" -eq 1 ] || { echo "$f: exit $status: $output"; return 1; }
		[ "${#lines[@]}" -eq 1 ] || { echo "$f: not one line: $output"; return 1; }
		[[ "$output" =~ ^visdev:\ .*/bad/[a-z0-9_-]+\.json:[0-9]+:[0-9]+:\ . ]] ||
			{ echo "$f: no file:line:col: $output"; return 1; }
		n=$((n + 1))
	done
	[ "$n" -ge 8 ]
}

@test "--demo and --fixture together are a usage error" {
	run "$VISDEV" --demo --fixture "$FIXTURES/mixed.json" list
	assert_status 2
	assert_output_has "choose one"
}

@test "an unknown option or an argument is one line with where the help is, exit 2" {
	run "$VISDEV" --demo list --bogus
	assert_status 2
	[ "$output" = "visdev: unknown option '--bogus'; see 'visdev list --help'" ]
	run "$VISDEV" --demo list extra
	assert_status 2
	assert_output_has "takes no arguments"
}

@test "list --help prints the usage, exit 0; unknown commands exit 2" {
	run "$VISDEV" list --help
	assert_status 0
	assert_output_has "usage: visdev list"
	run "$VISDEV" frobnicate
	assert_status 2
	assert_output_has "'frobnicate' is not a visdev command"
	run "$VISDEV"
	assert_status 2
}

@test "through the stand-in NVML, list gives the fixture backend's answers" {
	# a process's user comes from /proc under NVML, and these pids are not ours
	for f in mixed mig eight lost; do
		want=$("$VISDEV" --fixture "$FIXTURES/$f.json" list --json | jq 'del(.gpus[].processes[]?.user)')
		got=$(mock "$FIXTURES/$f.json" list --json | jq 'del(.gpus[].processes[]?.user)')
		[ "$got" = "$want" ] || { diff <(echo "$want") <(echo "$got"); return 1; }
	done
}

@test "an older NVML without the versioned entry points gives the same answers" {
	# such a driver has no NUMA query: that comes from sysfs, which has no fake GPUs
	want=$("$VISDEV" --fixture "$FIXTURES/mixed.json" list --json |
		jq 'del(.gpus[].numa_node, .gpus[].processes[]?.user)')
	got=$(MOCK_NVML_FIXTURE=$FIXTURES/mixed.json VISDEV_CUDA_LIB=$MOCK_NVML_DIR/libcuda.so.1 \
		"$VISDEV" --nvml-lib "$MOCK_NVML_DIR/old/libnvidia-ml.so.1" list --json |
		jq 'del(.gpus[].numa_node, .gpus[].processes[]?.user)')
	[ "$got" = "$want" ] || { diff <(echo "$want") <(echo "$got"); return 1; }
}

@test "a GPU that fell off the bus is shown as lost and the others still listed" {
	MOCK_NVML_LOST=1 run mock "$FIXTURES/mixed.json" list
	assert_status 0
	[[ "$(grep '^ *1 ' <<<"$output")" == *"lost"* ]]
	[ "$(grep -c '^ *[0-9] ' <<<"$output")" -eq 4 ]
	MOCK_NVML_LOST=1 run mock "$FIXTURES/mixed.json" list --json
	[ "$(jq -c '[.gpus[].lost]' <<<"$output")" = "[false,true,false,false]" ]
	[ "$(jq '.gpus[0].memory_total_mib' <<<"$output")" != null ]
}

@test "fields NVML does not support are unknown, not zero" {
	MOCK_NVML_NOT_SUPPORTED=temperature,power run mock "$FIXTURES/eight.json" list --json
	assert_status 0
	[ "$(jq '[.gpus[] | .temperature_c, .power_w | select(. != null)] | length' \
		<<<"$output")" -eq 0 ]
	[ "$(jq '[.gpus[].memory_total_mib | select(. != null)] | length' <<<"$output")" -eq 8 ]
	MOCK_NVML_NOT_SUPPORTED=temperature run mock "$FIXTURES/eight.json" list
	[[ "$(grep '^ *0 ' <<<"$output")" == *" ? "* ]]
}

@test "an NVML that fails to initialise is exit 1 with NVML's reason" {
	MOCK_NVML_INIT_FAIL=1 run mock "$FIXTURES/mixed.json" list
	assert_status 1
	assert_output_has "visdev: "
	[ "${#lines[@]}" -eq 1 ]
}

@test "CUDA's fastest-first order is asked of the driver once, then cached for these GPUs" {
	first=$(mock "$FIXTURES/mixed.json" list --json | jq -c '[.gpus[].cuda_rank]')
	[ "$first" = "[3,1,0,2]" ]
	[ -s "$XDG_CACHE_HOME/visdev/cuda-order" ]
	# the driver now fails: the cached order still answers
	got=$(MOCK_CUDA_FAIL=1 mock "$FIXTURES/mixed.json" list --json | jq -c '[.gpus[].cuda_rank]')
	[ "$got" = "$first" ]
	# other GPUs: the cache does not apply, and the failing driver leaves the order unknown
	got=$(MOCK_CUDA_FAIL=1 mock "$FIXTURES/eight.json" list --json | jq -c '[.gpus[].cuda_rank] | unique')
	[ "$got" = "[null]" ]
}

@test "the footer counts in words: no GPU, the one GPU, and CUDA_DEVICE_ORDER=VALUE joined" {
	run "$VISDEV" --fixture "$FIXTURES/none.json" list
	assert_status 0
	[ "$output" = $'no GPU found\nCUDA_VISIBLE_DEVICES is unset, and there is no GPU for CUDA to see' ]
	run "$VISDEV" --fixture "$FIXTURES/one.json" list
	assert_output_has "CUDA_VISIBLE_DEVICES is unset: CUDA sees the one GPU, numbered fastest first (CUDA_DEVICE_ORDER unset)"
	CUDA_DEVICE_ORDER=PCI_BUS_ID run "$VISDEV" --demo list
	assert_output_has "numbered in PCI bus order, as above (CUDA_DEVICE_ORDER=PCI_BUS_ID)"
	[[ "$output" != *"CUDA_DEVICE_ORDER ="* ]]
}

@test "list gives every GPU a state, and each process its pid, user and memory, in text and JSON" {
	run "$VISDEV" --demo list --json
	assert_status 0
	[ "$(jq -c '[.gpus[].state]' <<<"$output")" = '["busy","free","busy","free"]' ]
	[ "$(jq -c '.gpus[2].processes[0] | [.pid, .user, .used_mib, .name]' <<<"$output")" = \
		'[40211,"li",9214,"python"]' ]
	[ "$(jq -c '[.gpus[].reservable_mib]' <<<"$output")" = \
		"$(jq -c '[.gpus[].memory_free_mib]' <<<"$output")" ]
	run "$VISDEV" --demo list --color=never
	[[ "${lines[1]}" =~ ^\ +0\ +Tesla\ V100-SXM2-32GB\ +busy\ + ]]
	[[ "${lines[2]}" =~ ^\ +pid\ 31842\ +wang\ +29\.2\ GiB\ +python$ ]]
	[[ "${lines[3]}" =~ ^\ +1\ +Tesla\ P100-PCIE-16GB\ +free\ + ]]
	# memory in use that no listed process explains is said under the GPU
	run "$VISDEV" --fixture "$FIXTURES/mixed.json" list
	assert_output_has "10.0 GiB in use that no lease and no listed process explains"
	[ "$("$VISDEV" --fixture "$FIXTURES/mixed.json" list --json | jq -r '.gpus[3].state')" = busy ]
	[ "$("$VISDEV" --fixture "$FIXTURES/lost.json" list --json | jq -r '.gpus[1].state')" = lost ]
}

@test "leased, shared with what is left to reserve, and --free shows only what a job could have" {
	"$VISDEV" --demo run -- sleep 30 &
	job1=$!
	wait_for eval '[ "$("$VISDEV" --demo leases --json | jq ".leases | length")" -eq 1 ]'
	"$VISDEV" --demo run --mem 4G -- sleep 30 &
	job2=$!
	wait_for eval '[ "$("$VISDEV" --demo leases --json | jq ".leases | length")" -eq 2 ]'
	run "$VISDEV" --demo list --json
	kill "$job1" "$job2"
	# the exclusive job took GPU 1 (most free), the shared one GPU 3
	[ "$(jq -c '[.gpus[].state]' <<<"$output")" = '["busy","leased","busy","shared"]' ]
	[ "$(jq '.gpus[1].reservable_mib' <<<"$output")" -eq 0 ]
	free3=$(jq '.gpus[3].memory_free_mib' <<<"$output")
	[ "$(jq '.gpus[3].reservable_mib' <<<"$output")" -eq $((free3 - 4096)) ]
	wait_for gone "$job1"
	wait_for gone "$job2"
	run "$VISDEV" --demo list --free --json
	assert_status 0
	[ "$(jq -c '[.gpus[].index]' <<<"$output")" = '[1,3]' ]
	run "$VISDEV" --demo list --free --color=never
	assert_status 0
	[ "${#lines[@]}" -eq 3 ] # the header and GPUs 1 and 3
	[[ "${lines[1]}" == *" free "* && "${lines[2]}" == *" free "* ]]
	# neither the lost GPU nor the busy one
	run "$VISDEV" --fixture "$FIXTURES/lost.json" list --free --json
	[ "$(jq -c '[.gpus[].index]' <<<"$output")" = '[0]' ]
}

@test "list --free with nothing free says so and exits 3" {
	"$VISDEV" --fixture "$FIXTURES/one.json" run -- sleep 30 &
	job=$!
	wait_for eval '[ "$("$VISDEV" --fixture "$FIXTURES/one.json" leases --json | jq ".leases | length")" -eq 1 ]'
	run "$VISDEV" --fixture "$FIXTURES/one.json" list --free
	kill "$job"
	assert_status 3
	assert_output_has "no GPU is free now"
	assert_output_has "visdev run --wait"
}

# The offsets at which the header's words begin, and where each row's do.
columns_ok() {
	awk -v max=100 '
		length($0) > max { print "too wide (" length($0) "): " $0; bad = 1 }
		NR == 1 { state = index($0, "STATE"); mem = index($0, "MEMORY"); cuda = index($0, "CUDA"); next }
		/^$/ { exit }
		# a GPU row, or a MIG row: the state word starts under STATE, the memory ends under its header
		/^ *[0-9]+  / || /^       MIG [^-]/ {
			w = substr($0, state, 7)
			if (w !~ /^(free|shared|leased|held|busy|lost|mig) /) { print "STATE misaligned: " $0; bad = 1 }
			if (substr($0, mem + 16, 1) !~ /[B?-]/) { print "MEMORY misaligned: " $0; bad = 1 }
			if (substr($0, cuda, 4) !~ /^(cuda|drop|hidd|MIG )/) { print "CUDA misaligned: " $0; bad = 1 }
		}
		END { exit bad }'
}

@test "every line of list's table fits 100 columns and stays aligned: MIG, a lost GPU, long names" {
	for f in layout mig lost mixed eight select-mig; do
		run "$VISDEV" --fixture "$FIXTURES/$f.json" list --color=never
		assert_status 0
		columns_ok <<<"$output" || { echo "in $f.json"; return 1; }
	done
	run "$VISDEV" --fixture "$FIXTURES/layout.json" list --color=never
	# a long name is cut, not the columns after it
	assert_output_has "NVIDIA H100 NVL Extra Long Model Na.."
	[ "$(grep -c '^       MIG [0-9]' <<<"$output")" -eq 20 ]
	[ "$(grep -c '^       MIG-' <<<"$output")" -eq 20 ]
}

@test "the states are coloured on a terminal, not in a pipe, never with NO_COLOR or --color=never" {
	run "$VISDEV" --demo list
	[[ "$output" != *$'\e['* ]]
	run "$VISDEV" --demo list --color=always
	assert_output_has $'\e[32mfree  \e[0m'
	assert_output_has $'\e[31mbusy  \e[0m'
	run "$VISDEV" --demo list --color=sometimes
	assert_status 2
	[ "${#lines[@]}" -eq 1 ]
	assert_output_has "--color is auto, always or never, not 'sometimes'"
	# a real terminal: colour by default, none with NO_COLOR set
	colored=$(on_terminal "$VISDEV --demo list")
	plain=$(on_terminal "NO_COLOR=1 $VISDEV --demo list")
	[[ "$colored" == *$'\e[32mfree'* ]]
	[[ "$plain" == *free* && "$plain" != *$'\e['* ]]
}

# What a terminal (tmux) shows, escapes kept, once the command $1 has run on it.
on_terminal() {
	local sock="vd-$$-$BATS_TEST_NUMBER" screen
	tmux -L "$sock" -f /dev/null new-session -d -s main -x 120 -y 30 \
		"env TERM=xterm sh -c '$1; echo END-OF-COMMAND; sleep 30'"
	wait_for eval "tmux -L $sock capture-pane -p -t main | grep -q END-OF-COMMAND"
	screen=$(tmux -L "$sock" capture-pane -p -e -t main)
	tmux -L "$sock" kill-server 2>/dev/null || true
	printf '%s\n' "$screen"
}

@test "list --format prometheus: the format's rules hold, states, leases and the line are there, labels escaped" {
	run_check() { python3 "$BATS_TEST_DIRNAME/promcheck.py"; }
	# a model name with a quote and a backslash, to be escaped
	jq '.gpus[1].name = "Tesla \"P100\" \\ 16GB"' "$BATS_TEST_DIRNAME/../../src/lib/demo.json" >odd.json
	"$VISDEV" --fixture odd.json run -n 1 -- sleep 30 &
	job=$!
	wait_for eval '[ "$("$VISDEV" --fixture odd.json leases --json | jq ".leases | length")" -eq 1 ]'
	"$VISDEV" --fixture odd.json run -n 3 --wait -q -- true &
	waiter=$!
	wait_for eval '[ "$("$VISDEV" --fixture odd.json leases --json | jq ".line | length")" -eq 1 ]'
	run --separate-stderr "$VISDEV" --fixture odd.json list --format prometheus
	kill "$waiter" "$job"
	assert_status 0
	run_check <<<"$output"
	[[ "$output" == *'name="Tesla \"P100\" \\ 16GB"'* ]]
	grep -q '^visdev_leases 1$' <<<"$output"
	grep -q '^visdev_waiting_requests 1$' <<<"$output"
	grep -Eq '^visdev_waiting_request_info\{place="1",user="[^"]+",pid="[0-9]+",gpus="3"\} 1$' <<<"$output"
	grep -Eq '^visdev_device_state\{gpu="0",uuid="GPU-[^"]+",state="busy"\} 1$' <<<"$output"
	grep -Eq '^visdev_lease_info\{gpu="[0-9]",uuid="GPU-[^"]+",user="[^"]+",pid="[0-9]+",since="[0-9]+",mode="exclusive"\} 1$' <<<"$output"
	grep -q '^visdev_gpu_utilization_ratio{gpu="0",uuid="GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"} 0.97$' <<<"$output"
	# MIG devices are devices too; the checker refuses what breaks the format
	run "$VISDEV" --fixture "$FIXTURES/mig.json" list --format prometheus
	run_check <<<"$output"
	grep -q '^visdev_device_state{gpu="0",uuid="MIG-[^"]*",gi="1",ci="0",state="free"} 1$' <<<"$output"
	! printf '# HELP a x\n# TYPE a gauge\na{b="c"d} 1\n' | run_check >/dev/null
	run "$VISDEV" --demo list --format csv
	assert_status 2
	assert_output_has "--format takes prometheus, not 'csv'"
}
