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
	[ "$(jq -c '.devices[0].mig | [.gi, .ci, .profile]' <<<"$output")" = '[4294967295,3000000000,null]' ]
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
	for f in mixed mig eight lost; do
		want=$("$VISDEV" --fixture "$FIXTURES/$f.json" list --json)
		got=$(mock "$FIXTURES/$f.json" list --json)
		[ "$got" = "$want" ] || { diff <(echo "$want") <(echo "$got"); return 1; }
	done
}

@test "an older NVML without the versioned entry points gives the same answers" {
	# such a driver has no NUMA query: that comes from sysfs, which has no fake GPUs
	want=$("$VISDEV" --fixture "$FIXTURES/mixed.json" list --json | jq 'del(.gpus[].numa_node)')
	got=$(MOCK_NVML_FIXTURE=$FIXTURES/mixed.json VISDEV_CUDA_LIB=$MOCK_NVML_DIR/libcuda.so.1 \
		"$VISDEV" --nvml-lib "$MOCK_NVML_DIR/old/libnvidia-ml.so.1" list --json |
		jq 'del(.gpus[].numa_node)')
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
