#!/usr/bin/env bats
# visdev pick: choosing GPUs and writing the value for them.

load helper

@test "pick prints export lines that eval sets, and the value means the GPU chosen" {
	run "$VISDEV" --fixture "$FIXTURES/four.json" pick
	assert_status 0
	[ "${lines[0]}" = "export CUDA_VISIBLE_DEVICES=0" ]
	[ "${lines[1]}" = "export CUDA_DEVICE_ORDER=PCI_BUS_ID" ]
	eval "$output"
	[ "$CUDA_VISIBLE_DEVICES" = 0 ] && [ "$CUDA_DEVICE_ORDER" = PCI_BUS_ID ]
}

@test "pick skips GPUs with processes visdev did not start" {
	# on the demo server GPUs 0 and 2 run python; 1 and 3 are free
	run "$VISDEV" --demo pick -n 2 --json
	assert_status 0
	[ "$(jq -c '[.devices[].index] | sort' <<<"$output")" = "[1,3]" ]
}

@test "pick -n 2 prefers GPUs joined by NVLink" {
	run "$VISDEV" --fixture "$FIXTURES/four.json" pick -n 2 --exclude 0 --json
	assert_status 0
	[ "$(jq -c '[.devices[].index] | sort' <<<"$output")" = "[2,3]" ]
}

@test "pick --json has devices and env" {
	run "$VISDEV" --fixture "$FIXTURES/four.json" pick -n 2 --json
	assert_status 0
	jq -e '.devices[0] | has("index") and has("uuid") and has("name")' <<<"$output"
	[ "$(jq -r .env.CUDA_DEVICE_ORDER <<<"$output")" = PCI_BUS_ID ]
	[ "$(jq -r .env.CUDA_VISIBLE_DEVICES <<<"$output")" = "$(jq -r '[.devices[].index | tostring] | join(",")' <<<"$output")" ]
}

@test "pick --format uuid and --shell fish" {
	run "$VISDEV" --fixture "$FIXTURES/four.json" pick --format uuid
	assert_status 0
	[ "${lines[0]}" = "export CUDA_VISIBLE_DEVICES=GPU-0a1b2c3d-0000-4000-8000-000000000000" ]
	run "$VISDEV" --fixture "$FIXTURES/four.json" pick --shell fish
	[ "${lines[0]}" = "set -gx CUDA_VISIBLE_DEVICES 0;" ]
	[ "${lines[1]}" = "set -gx CUDA_DEVICE_ORDER PCI_BUS_ID;" ]
}

@test "when nothing fits, pick exits 3 and says why for each GPU" {
	run "$VISDEV" --demo pick --min-free 20G
	assert_status 3
	assert_output_has "GPU 0: "
	assert_output_has "GPU 1: 16.0 GiB free, 20.0 GiB asked"
	assert_output_has "GPU 3: 11.0 GiB free, 20.0 GiB asked"
	run "$VISDEV" --demo pick --model A100
	assert_status 3
	assert_output_has "does not match 'A100'"
	run --separate-stderr "$VISDEV" --demo pick --min-free 20G --json
	assert_status 3
	[ "$(jq '.reasons | length' <<<"$output")" -ge 4 ]
}

@test "the eval idiom fails closed: under set -e the script stops, and every GPU is hidden" {
	export VISDEV
	run bash -c 'set -e; CUDA_VISIBLE_DEVICES=0,1,2,3; eval "$("$VISDEV" --demo pick --min-free 20G 2>/dev/null)"; echo "went on"'
	assert_status 1
	[[ "$output" != *"went on"* ]]
	run bash -c 'eval "$("$VISDEV" --demo pick --min-free 20G 2>/dev/null)" || echo "failed, [${CUDA_VISIBLE_DEVICES-unset}]"'
	[ "$output" = "failed, []" ]
	run fish -c 'eval ("$VISDEV" --demo pick --shell fish --min-free 20G 2>/dev/null); or echo "failed, [$CUDA_VISIBLE_DEVICES]" (set -q CUDA_VISIBLE_DEVICES; and echo set)'
	[ "$output" = "failed, [] set" ]
	run fish -c 'eval ("$VISDEV" --demo pick --shell fish -n 2 2>/dev/null); and echo "[$CUDA_VISIBLE_DEVICES]"'
	[ "$output" = "[1,3]" ]
}

@test "pick --value prints the value alone, as UUIDs, and nothing when none fits" {
	run --separate-stderr "$VISDEV" --fixture "$FIXTURES/four.json" pick --value -n 2
	assert_status 0
	[[ "$output" =~ ^GPU-[0-9a-f-]+,GPU-[0-9a-f-]+$ ]]
	# the UUIDs name the GPUs pick's JSON names, whatever CUDA_DEVICE_ORDER is
	want=$("$VISDEV" --fixture "$FIXTURES/four.json" pick -n 2 --json | jq -r '[.devices[].uuid] | join(",")')
	[ "$output" = "$want" ]
	run --separate-stderr "$VISDEV" --fixture "$FIXTURES/four.json" pick --value --format index -n 2
	[ "$output" = "$("$VISDEV" --fixture "$FIXTURES/four.json" pick -n 2 --json | jq -r '.env.CUDA_VISIBLE_DEVICES')" ]
	run --separate-stderr "$VISDEV" --demo pick --value --min-free 20G
	assert_status 3
	[ -z "$output" ]
	run "$VISDEV" --demo pick --value --shell fish
	assert_status 2
}

@test "--or-cpu falls back to the CPU: an empty value, a note, exit 0" {
	run "$VISDEV" --demo pick --min-free 100G --or-cpu
	assert_status 0
	assert_output_has "export CUDA_VISIBLE_DEVICES=''"
	assert_output_has "falling back to the CPU"
}

@test "a parent's restriction is respected and the value is written as UUIDs" {
	CUDA_VISIBLE_DEVICES=2,3 CUDA_DEVICE_ORDER=PCI_BUS_ID \
		run "$VISDEV" --fixture "$FIXTURES/four.json" pick --json
	assert_status 0
	idx=$(jq '.devices[0].index' <<<"$output")
	[ "$idx" = 2 ] || [ "$idx" = 3 ]
	value=$(jq -r .env.CUDA_VISIBLE_DEVICES <<<"$output")
	[[ "$value" == GPU-* ]]
	CUDA_VISIBLE_DEVICES=3 CUDA_DEVICE_ORDER=PCI_BUS_ID \
		run "$VISDEV" --fixture "$FIXTURES/four.json" pick -n 2
	assert_status 3
	assert_output_has "hidden by CUDA_VISIBLE_DEVICES"
}

@test "every value pick writes resolves, under CUDA's rules, to exactly the GPUs chosen" {
	checked=0
	for args in "-n 1" "-n 2" "-n 3" "-n 4" "-n 2 --format uuid" "-n 3 --policy least-used" \
		"-n 2 --exclude 1" "-n 1 --policy pack --mem 10G"; do
		for parent in unset 0,2,3 1,3; do
			if [ "$parent" = unset ]; then
				out=$(env -u CUDA_VISIBLE_DEVICES "$VISDEV" --fixture "$FIXTURES/four.json" pick $args --json) || continue
			else
				out=$(CUDA_VISIBLE_DEVICES=$parent CUDA_DEVICE_ORDER=PCI_BUS_ID \
					"$VISDEV" --fixture "$FIXTURES/four.json" pick $args --json) || continue
			fi
			want=$(jq -c '[.devices[].index]' <<<"$out")
			value=$(jq -r .env.CUDA_VISIBLE_DEVICES <<<"$out")
			got=$("$VISDEV" --fixture "$FIXTURES/four.json" map --order pci --json -- "$value" |
				jq -c '[.devices[].index]')
			[ "$got" = "$want" ] || { echo "$args / $parent: '$value' gives $got, want $want"; return 1; }
			checked=$((checked + 1))
		done
	done
	# some combinations do not fit (4 GPUs under a 3-GPU parent): most do
	[ "$checked" -ge 16 ] || { echo "only $checked values checked"; return 1; }
}

@test "malformed selection options are usage errors" {
	run "$VISDEV" --demo pick --min-free 8X
	assert_status 2
	assert_output_has "invalid size '8X'"
	run "$VISDEV" --demo pick -n 0
	assert_status 2
	run "$VISDEV" --demo pick --max-util 101
	assert_status 2
	run "$VISDEV" --demo pick --policy fastest
	assert_status 2
	run "$VISDEV" --demo pick --format hex
	assert_status 2
	run "$VISDEV" --demo pick --shell tcsh
	assert_status 2
	run "$VISDEV" --demo pick extra
	assert_status 2
}

@test "pick --help says that pick reserves nothing" {
	run "$VISDEV" pick --help
	assert_status 0
	assert_output_has "pick reserves nothing"
}

@test "pick --model, --max-util and --policy choose as asked" {
	run "$VISDEV" --demo pick --model '2080*' --json
	assert_status 0
	[ "$(jq -c '[.devices[].index]' <<<"$output")" = "[3]" ]
	# the most free memory first: the P100 (16 GiB free) before the 2080 Ti (11 GiB)
	run "$VISDEV" --demo pick --json
	[ "$(jq -c '[.devices[].index]' <<<"$output")" = "[1]" ]
	# the tightest fit first
	run "$VISDEV" --demo pick --policy pack --json
	[ "$(jq -c '[.devices[].index]' <<<"$output")" = "[3]" ]
	run "$VISDEV" --demo pick --max-util 0 -n 2 --json
	assert_status 0
	run "$VISDEV" --fixture "$FIXTURES/mixed.json" pick --max-util 50 -n 4
	assert_status 3
	assert_output_has "utilis"
}

@test "a MIG instance is chosen by its UUID, and the value means it" {
	run "$VISDEV" --fixture "$FIXTURES/mig.json" pick --json --min-free 1G --exclude 1
	assert_status 0
	value=$(jq -r .env.CUDA_VISIBLE_DEVICES <<<"$output")
	uuid=$(jq -r '.devices[0].uuid' <<<"$output")
	[ "$value" = "$uuid" ] && [[ "$value" == MIG-* ]]
	got=$("$VISDEV" --fixture "$FIXTURES/mig.json" map --json -- "$value" | jq -r '.devices[0].uuid')
	[ "$got" = "$uuid" ]
}

@test "pick --json gives a MIG instance's own free memory, never its GPU's" {
	# mig.json: GPU 0 has 40960 MiB, 7460 used; its 3g.20gb instance 20096, 7210 used
	run "$VISDEV" --fixture "$FIXTURES/mig.json" pick --json --exclude 1 --policy pack --min-free 12G
	assert_status 0
	[ "$(jq -c '[.devices[] | [.profile, .memory_free_mib]]' <<<"$output")" = \
		'[["3g.20gb",12886]]' ]
	run "$VISDEV" --fixture "$FIXTURES/mig.json" pick --json --exclude 1 --policy pack
	[ "$(jq -c '[.devices[] | [.profile, .memory_free_mib]]' <<<"$output")" = \
		'[["2g.10gb",9971]]' ]
}

@test "pick never writes a value of which CUDA would drop a part" {
	# driver 550: a MIG device and a whole GPU are not enumerated together
	run --separate-stderr "$VISDEV" --fixture "$FIXTURES/mig.json" pick -n 2 --json
	assert_status 3
	[ "$(jq .env <<<"$output")" = null ]
	[[ "$stderr" == *"no whole GPU beside it"* ]]
	# from R570 they are: the value holds both, and CUDA sees both
	run "$VISDEV" --fixture "$FIXTURES/engine-r570.json" pick -n 2 --json --exclude 0,2,3
	assert_status 0
	value=$(jq -r .env.CUDA_VISIBLE_DEVICES <<<"$output")
	[ "$(jq '.devices | length' <<<"$output")" = 2 ]
	run "$VISDEV" --fixture "$FIXTURES/engine-r570.json" map --json -- "$value"
	[ "$(jq '.devices | length' <<<"$output")" = 2 ]
	[ "$(jq '.not_enumerated | length' <<<"$output")" = 0 ]
}

@test "an --exclude beyond the machine and an empty --model are errors" {
	run "$VISDEV" --demo pick --exclude 9
	assert_status 2
	assert_output_has "there is no GPU 9 to exclude"
	run "$VISDEV" --demo pick --model ''
	assert_status 2
	assert_output_has "empty model pattern"
}

@test "under a parent value read in an assumed order, pick says so" {
	CUDA_VISIBLE_DEVICES=1 run "$VISDEV" --fixture "$FIXTURES/engine-norank.json" pick
	assert_output_has "fastest-first order is unknown"
}

@test "on a machine with no driver, --or-cpu still falls back to the CPU" {
	run "$VISDEV" pick --or-cpu
	assert_status 0
	assert_output_has "export CUDA_VISIBLE_DEVICES=''"
	assert_output_has "no NVIDIA driver found"
	run "$VISDEV" pick
	assert_status 3
	run "$VISDEV" run --or-cpu -- sh -c 'echo "[$CUDA_VISIBLE_DEVICES]"'
	assert_status 0
	assert_output_has "[]"
	run "$VISDEV" run -- true
	assert_status 3
}

@test "memory in use that no lease and no listed process explains is busy: never chosen" {
	# GPU 3 of mixed.json: 10 of 10 GiB used, 100% utilised, its processes unknown
	run "$VISDEV" --fixture "$FIXTURES/mixed.json" pick -n 2 --json
	assert_status 0
	[ "$(jq -c '[.devices[].index]' <<<"$output")" = "[0,2]" ]
	run "$VISDEV" --fixture "$FIXTURES/mixed.json" pick -n 3
	assert_status 3
	assert_output_has "GPU 3: busy: 10.0 GiB in use that no lease and no process NVML lists explains (100% utilised)"
}

@test "reasons that say the same of several GPUs are one line" {
	CUDA_VISIBLE_DEVICES=0 run "$VISDEV" --fixture "$FIXTURES/eight.json" pick -n 2 --exclude 0
	assert_status 3
	[ "$(grep -c "hidden by CUDA_VISIBLE_DEVICES" <<<"$output")" -eq 1 ]
	assert_output_has "  GPUs 1, 2, 3, 4, 5, 6, 7: hidden by CUDA_VISIBLE_DEVICES"
	run "$VISDEV" --fixture "$FIXTURES/eight.json" pick -n 8 --exclude 2,5
	assert_output_has "  GPUs 2, 5: excluded"
}
