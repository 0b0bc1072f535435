#!/usr/bin/env bats
# visdev map: CUDA's rules applied to a value, logical <-> physical, bad input.

load helper

@test "map 2,1 in PCI order: the guide's example, cuda:0 is the RTX 3090" {
	run "$VISDEV" --demo map 2,1 --order pci
	assert_status 0
	[[ "${lines[1]}" == "cuda:0 -> GPU 2  NVIDIA GeForce RTX 3090 "* ]]
	[[ "${lines[2]}" == "cuda:1 -> GPU 1  Tesla P100-PCIE-16GB "* ]]
	[[ "${lines[3]}" == "hidden:   GPU 0 "* ]]
	[[ "${lines[4]}" == "          GPU 3 "* ]]
	# the PCI bus id as Linux writes it, with a four-digit domain
	[[ "${lines[1]}" == *"  0000:86:00.0" ]]
}

@test "map reads the value and the order from the environment by default" {
	CUDA_VISIBLE_DEVICES=2,1 CUDA_DEVICE_ORDER=PCI_BUS_ID run "$VISDEV" --demo map --json
	assert_status 0
	[ "$(jq -r .value <<<"$output")" = "2,1" ]
	[ "$(jq -r .order <<<"$output")" = pci ]
	[ "$(jq -c '[.devices[] | [.cuda, .index]]' <<<"$output")" = "[[0,2],[1,1]]" ]
}

@test "map in CUDA's default order counts fastest first, and says so" {
	run "$VISDEV" --demo map 2,1
	assert_status 0
	# fastest first on the demo: 3090, V100, 2080 Ti, P100
	[[ "${lines[1]}" == "cuda:0 -> GPU 3 "* ]]
	[[ "${lines[2]}" == "cuda:1 -> GPU 0 "* ]]
	assert_output_has "ordinal 2 is GPU 3, not GPU 2 as nvidia-smi numbers"
}

@test "map's first line says what the value is: ordinals, UUIDs or unset" {
	run "$VISDEV" --demo map 1 --order pci
	[ "${lines[0]}" = "CUDA_VISIBLE_DEVICES='1', ordinals counted in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID)" ]
	# UUIDs name GPUs whatever the order: no talk of ordinals
	run "$VISDEV" --demo map GPU-b61e4c27,GPU-8932f937
	[ "${lines[0]}" = "CUDA_VISIBLE_DEVICES='GPU-b61e4c27,GPU-8932f937', UUIDs: numbered in the order written, whatever CUDA_DEVICE_ORDER says" ]
	[[ "${lines[1]}" == "cuda:0 -> GPU 2 "* ]]
	run "$VISDEV" --demo map --unset
	[[ "${lines[0]}" == "CUDA_VISIBLE_DEVICES unset, devices numbered fastest first "* ]]
}

# Each device line of map's table: within 100 columns, its UUID and PCI bus
# id starting at the same column as every other's.
table_ok() {
	awk -v max=100 '
		/^(cuda:[0-9]+ ->|dropped:|hidden:| ) +GPU [0-9]/ {
			if (length($0) > max) { print "too wide (" length($0) "): " $0; bad = 1 }
			u = match($0, /(GPU|MIG)-[0-9a-f-]+  [0-9A-Fa-f:.]+$/)
			if (!u) { print "no UUID and bus id at the end: " $0; bad = 1 }
			if (col && u != col) { print "misaligned: " $0; bad = 1 }
			col = u; rows++
		}
		END { if (!rows) print "no device lines"; exit bad || !rows }'
}

@test "map's table fits 100 columns and stays aligned: 23 MIG devices and GPUs, a long name, a lost GPU" {
	f=$FIXTURES/layout.json
	for args in "--unset --order pci" "0,1,2,3,4,5,6,7,8,9,10,11 --order pci --logical 0,10" \
		"--unset" "5,6"; do
		# shellcheck disable=SC2086
		run "$VISDEV" --fixture "$f" map $args
		table_ok <<<"$output" || { echo "map $args"; return 1; }
	done
	run "$VISDEV" --fixture "$f" map --unset --order pci
	[[ "${lines[11]}" == "cuda:10 -> GPU 2  MIG 2g.35gb gi 11 ci 0 "* ]]
	[[ "${lines[22]}" == "cuda:21 -> GPU 6  NVIDIA H100 NVL Extra Lo..  GPU-"* ]]
	assert_output_has "note: GPU 5 has fallen off the bus"
	for f in demo mig lost mixed eight; do
		if [ "$f" = demo ]; then run "$VISDEV" --demo map 2,1; else run "$VISDEV" --fixture "$FIXTURES/$f.json" map --unset; fi
		table_ok <<<"$output" || { echo "in $f"; return 1; }
	done
	# no device visible: the label column is as wide as "dropped:  "
	run "$VISDEV" --fixture "$FIXTURES/eight.json" map GPU-ffff
	[[ "${lines[1]}" == "hidden:   GPU 0  NVIDIA "* ]]
	NVIDIA_VISIBLE_DEVICES=0,2 run "$VISDEV" --demo map 1
	[[ "$output" == *$'\n          GPU 2  NVIDIA GeForce RTX 3090     GPU-b61e4c27-'* ]]
	table_ok <<<"$output"
}

@test "map --json has the contract's keys" {
	run "$VISDEV" --demo map 0,2 --order pci --json
	assert_status 0
	jq -e 'has("value") and has("order") and has("devices") and has("stop")
		and has("warnings")' <<<"$output"
	jq -e '.devices[0] | has("cuda") and has("index") and has("uuid") and has("name")' \
		<<<"$output"
	[ "$(jq -c .stop <<<"$output")" = null ]
}

@test "a negative ordinal ends the list: where, which token and why" {
	run "$VISDEV" --demo map 0,2,-1,1 --order pci --json
	assert_status 0
	[ "$(jq -c '[.devices[].index]' <<<"$output")" = "[0,2]" ]
	[ "$(jq -c .stop <<<"$output")" = '{"position":2,"token":"-1","reason":"negative"}' ]
	run "$VISDEV" --demo map 0,2,-1,1 --order pci
	assert_output_has "CUDA stops reading at element 3 of 4, '-1': a negative ordinal"
}

@test "an ordinal out of range ends the list the same way" {
	run "$VISDEV" --demo map 0,2,9,1 --order pci --json
	[ "$(jq -c '[.devices[].index]' <<<"$output")" = "[0,2]" ]
	[ "$(jq -r .stop.reason <<<"$output")" = out-of-range ]
}

@test "a device named twice makes nothing visible, and that is not an error" {
	run "$VISDEV" --demo map 0,0 --order pci --json
	assert_status 0
	[ "$(jq '.devices | length' <<<"$output")" = 0 ]
	[ "$(jq -c .duplicate <<<"$output")" = '{"first":0,"position":1}' ]
	run "$VISDEV" --demo map 0,0 --order pci
	assert_status 0
	assert_output_has "name the same device"
	assert_output_has "CUDA sees no GPU"
}

@test "an empty value hides every GPU; --unset shows every GPU" {
	run "$VISDEV" --demo map ""
	assert_status 0
	assert_output_has "CUDA_VISIBLE_DEVICES is empty: CUDA sees no GPU"
	CUDA_VISIBLE_DEVICES=0 run "$VISDEV" --demo map --unset --json
	assert_status 0
	[ "$(jq '.devices | length' <<<"$output")" = 4 ]
	[ "$(jq .value <<<"$output")" = null ]
}

@test "UUIDs and their unique prefixes name GPUs; an unknown one ends the list" {
	run "$VISDEV" --demo map GPU-b61e,GPU-8932f937-d72c-4106-c12f-20bd9faed9f6,GPU-ffff --json
	assert_status 0
	[ "$(jq -c '[.devices[].index]' <<<"$output")" = "[2,0]" ]
	[ "$(jq -r .stop.reason <<<"$output")" = no-match ]
	[ "$(jq -r .stop.token <<<"$output")" = GPU-ffff ]
}

@test "a value that looks like an option is read after --" {
	run "$VISDEV" --demo map --order pci --json -- -1
	assert_status 0
	[ "$(jq -r .stop.reason <<<"$output")" = negative ]
}

@test "--logical answers which physical GPUs DataParallel's device_ids are" {
	CUDA_VISIBLE_DEVICES=2,1 CUDA_DEVICE_ORDER=PCI_BUS_ID \
		run "$VISDEV" --demo map --logical 0,1
	assert_status 0
	assert_output_has "cuda:0 is GPU 2  NVIDIA GeForce RTX 3090"
	assert_output_has "cuda:1 is GPU 1  Tesla P100-PCIE-16GB"
	CUDA_VISIBLE_DEVICES=2,1 CUDA_DEVICE_ORDER=PCI_BUS_ID \
		run "$VISDEV" --demo map --logical 0,1 --json
	[ "$(jq -c '[.logical[].index]' <<<"$output")" = "[2,1]" ]
}

@test "--logical beyond the visible devices is 'invalid device ordinal', exit 3" {
	CUDA_VISIBLE_DEVICES=2,1 run "$VISDEV" --demo map --logical 2
	assert_status 3
	assert_output_has "cuda:2 does not exist"
	assert_output_has "invalid device ordinal"
	CUDA_VISIBLE_DEVICES=2,1 run "$VISDEV" --demo map --logical 2 --json
	assert_status 3
}

@test "--physical answers which cuda:N a GPU is, or that it is hidden" {
	CUDA_VISIBLE_DEVICES=2,1 CUDA_DEVICE_ORDER=PCI_BUS_ID \
		run "$VISDEV" --demo map --physical 1,3
	assert_status 0
	assert_output_has "GPU 1 is cuda:1"
	assert_output_has "GPU 3 is hidden"
	CUDA_VISIBLE_DEVICES=2,1 CUDA_DEVICE_ORDER=PCI_BUS_ID \
		run "$VISDEV" --demo map --physical 1,3 --json
	[ "$(jq -c '[.physical[].cuda]' <<<"$output")" = "[1,null]" ]
	run "$VISDEV" --demo map --physical 9
	assert_status 3
	assert_output_has "there is no GPU 9"
}

@test "malformed options are usage errors, exit 2" {
	run "$VISDEV" --demo map --logical 0,x
	assert_status 2
	assert_output_has "--logical takes a list of whole numbers"
	run "$VISDEV" --demo map --physical ""
	assert_status 2
	run "$VISDEV" --demo map --order sideways
	assert_status 2
	assert_output_has "--order takes pci or fastest"
	run "$VISDEV" --demo map 0 --unset
	assert_status 2
	run "$VISDEV" --demo map 0 1
	assert_status 2
	assert_output_has "map takes one value"
	run "$VISDEV" --demo map --bogus
	assert_status 2
	[ "$output" = "visdev: unknown option '--bogus'; see 'visdev map --help'" ]
}

@test "an unknown CUDA_DEVICE_ORDER is reported and CUDA's default used" {
	CUDA_DEVICE_ORDER=pci run "$VISDEV" --demo map 0 --json
	assert_status 0
	assert_output_has "CUDA_DEVICE_ORDER 'pci' is neither FASTEST_FIRST nor PCI_BUS_ID"
}

@test "where the fastest-first order is unknown, map says it assumed PCI order" {
	run "$VISDEV" --fixture "$FIXTURES/engine-norank.json" map 1,0 --json
	assert_status 0
	[ "$(jq .order_assumed <<<"$output")" = true ]
	[ "$(jq -c '[.devices[].index]' <<<"$output")" = "[1,0]" ]
	jq -e '.warnings | map(test("fastest-first order is unknown")) | any' <<<"$output"
}

@test "MIG devices CUDA does not enumerate get no cuda:N and are listed apart, with the reason" {
	mig=$("$VISDEV" --fixture "$FIXTURES/mig.json" list --json |
		jq -r '[.gpus[].mig[].uuid] | join(",")')
	run "$VISDEV" --fixture "$FIXTURES/mig.json" map "$mig" --json
	assert_status 0
	# driver 550: one MIG device in all, the first named
	[ "$(jq -c '[.devices[] | [.cuda, .gi]]' <<<"$output")" = "[[0,1]]" ]
	[ "$(jq -c '[.not_enumerated[] | [.position, .reason, .gi]]' <<<"$output")" = \
		'[[1,"one-mig",5],[2,"one-mig",13]]' ]
	jq -e '.not_enumerated | all(has("cuda") | not)' <<<"$output"
	jq -e '.warnings | map(test("one MIG device in all")) | any' <<<"$output"
	run "$VISDEV" --fixture "$FIXTURES/mig.json" map "$mig"
	assert_status 0
	[ "$(grep -c '^cuda:' <<<"$output")" -eq 1 ]
	[[ "${lines[2]}" == "dropped:  GPU 0  MIG 2g.10gb gi 5 ci 0 "* ]]
	[[ "${lines[3]}" == *"element 2: driver 550.54.15 lets a process use one MIG device in all"* ]]
}

@test "before R570, a whole GPU beside a MIG device is dropped; from R570 it stays" {
	run "$VISDEV" --fixture "$FIXTURES/engine.json" map GPU-7a91,MIG-5e1f0a2b --json
	assert_status 0
	[ "$(jq -c '[.devices[].uuid[0:8]]' <<<"$output")" = '["MIG-5e1f"]' ]
	[ "$(jq -c '[.not_enumerated[] | [.index, .position, .reason]]' <<<"$output")" = \
		'[[2,0,"beside-mig"]]' ]
	run "$VISDEV" --fixture "$FIXTURES/engine-r570.json" map GPU-7a91,MIG-9c04 --json
	assert_status 0
	[ "$(jq -c '[.devices[] | [.cuda, .uuid[0:8]]]' <<<"$output")" = \
		'[[0,"GPU-7a91"],[1,"MIG-9c04"]]' ]
	[ "$(jq '.not_enumerated | length' <<<"$output")" = 0 ]
}

@test "unset on a MIG machine: CUDA sees one MIG device before R570, one per GPU instance from it" {
	run "$VISDEV" --fixture "$FIXTURES/engine.json" map --unset --order pci --json
	assert_status 0
	[ "$(jq -c '[.devices[].uuid[0:8]]' <<<"$output")" = '["MIG-5e1f"]' ]
	[ "$(jq '.not_enumerated | length' <<<"$output")" = 4 ]
	jq -e '.not_enumerated | all(.position == null)' <<<"$output"
	run "$VISDEV" --fixture "$FIXTURES/engine-r570.json" map --unset --order pci
	assert_status 0
	[ "$(grep -c '^cuda:' <<<"$output")" -eq 5 ]
	assert_output_has "CUDA sees 5 devices, not all 6 there are"
	run "$VISDEV" --fixture "$FIXTURES/engine-r570.json" map --unset --order pci --physical 1,0
	assert_output_has "GPU 1 is in MIG mode: its MIG device MIG-5e1f0a2b-3c4d-5e6f-8a9b-0c1d2e3f4a5b is cuda:1; its MIG device MIG-9c04b1e7-8d2a-5f3c-a6e9-1b7d0c4f2e86 is cuda:2"
	assert_output_has "GPU 0 is cuda:0"
}

@test "--logical past the devices CUDA enumerates: cuda:N does not exist, exit 3" {
	run "$VISDEV" --fixture "$FIXTURES/engine.json" map MIG-5e1f0a2b,MIG-5e1f7c8d --logical 0,1
	assert_status 3
	assert_output_has "cuda:0 is GPU 1  MIG 3g.40gb gi 1 ci 0"
	assert_output_has "visdev: cuda:1 does not exist: CUDA sees 1 device, so it answers 'invalid device ordinal'"
	run "$VISDEV" --fixture "$FIXTURES/engine.json" map MIG-5e1f0a2b,MIG-5e1f7c8d --logical 1 --json
	assert_status 3
	[ "$(jq -c '.logical' <<<"$output")" = '[{"index":null,"cuda":1}]' ]
}

@test "a long --logical list past the devices gets one line and a count, not a line each" {
	run --separate-stderr "$VISDEV" --demo map --logical "$(seq -s, 0 19999)"
	assert_status 3
	[ "${#stderr_lines[@]}" -eq 2 ]
	[ "${stderr_lines[0]}" = "visdev: cuda:4 does not exist: CUDA sees 4 devices, so it answers 'invalid device ordinal'" ]
	[ "${stderr_lines[1]}" = "visdev: and 19995 more of the ordinals --logical names do not exist either" ]
	[ "$(grep -c '^cuda:[0-3] is GPU' <<<"$output")" -eq 4 ]
	# a malformed long list: one line, naming the element that is wrong, not the whole list
	run --separate-stderr "$VISDEV" --demo map --logical "$(seq -s, 0 19999),x"
	assert_status 2
	[ "${stderr_lines[0]}" = "visdev: --logical takes a list of whole numbers from 0 to 65535 such as 0,2; 'x' (element 20001 of '0,1,2,3,4,5,6,7,8,9,...') is not one" ]
	[ "${#stderr}" -lt 2000 ]
}

@test "a value that starts with a dash and a digit is a value: map -1 hides every GPU" {
	run "$VISDEV" --demo map -1 --json
	assert_status 0
	[ "$(jq -r .value <<<"$output")" = -1 ]
	[ "$(jq '.devices | length' <<<"$output")" = 0 ]
	[ "$(jq -r .stop.reason <<<"$output")" = negative ]
	run "$VISDEV" --demo map --order pci -0
	assert_status 0
	[[ "${lines[1]}" == "cuda:0 -> GPU 0 "* ]]
	run "$VISDEV" --demo map -- -1
	assert_status 0
	assert_output_has "a negative ordinal ends the list"
	# an option's own argument is still the option's
	run "$VISDEV" --demo map --physical -1
	assert_status 2
	assert_output_has "--physical takes a list of whole numbers"
	run "$VISDEV" --demo map -1 -0
	assert_status 2
	assert_output_has "map takes one value"
	run "$VISDEV" map --help
	assert_status 0
	assert_output_has "'visdev map -1'"
}

@test "NVIDIA_VISIBLE_DEVICES is explained too" {
	NVIDIA_VISIBLE_DEVICES=0,2 run "$VISDEV" --demo map --json
	assert_status 0
	[ "$(jq -r .nvidia_visible_devices.mode <<<"$output")" = list ]
	[ "$(jq -c '[.nvidia_visible_devices.devices[].index]' <<<"$output")" = "[0,2]" ]
	NVIDIA_VISIBLE_DEVICES=none run "$VISDEV" --demo map
	assert_output_has "NVIDIA_VISIBLE_DEVICES=none: a container gets no GPU"
}

@test "NVIDIA_VISIBLE_DEVICES as the container runtime reads it" {
	# trimmed, duplicates dropped, +1 is 1, UUIDs in any case, PCI bus ids
	NVIDIA_VISIBLE_DEVICES=" +1 , 1,gpu-5F0A9E83-41c6-42b7-8d3e-e29b70c1a6f4,0000:1a:00.0" \
		run "$VISDEV" --demo map --json
	assert_status 0
	[ "$(jq -c '.nvidia_visible_devices | [.mode, [.devices[].index], .refused]' \
		<<<"$output")" = '["list",[1,3,0],false]' ]
	# void, anywhere, over all; the first of all and none decides; ALL is all
	for v in "0,void:void" "all,void:void" "none,all:none" "all,none:all" "2,ALL:all" ",:void"; do
		NVIDIA_VISIBLE_DEVICES=${v%:*} run "$VISDEV" --demo map --json
		[ "$(jq -r .nvidia_visible_devices.mode <<<"$output")" = "${v##*:}" ]
	done
	# an element that names no device: the container is not started, and only then is it said
	NVIDIA_VISIBLE_DEVICES=0,GPU-8932f937 run "$VISDEV" --demo map
	assert_status 0
	assert_output_has "NVIDIA_VISIBLE_DEVICES=0,GPU-8932f937: the container runtime does not start a container"
	assert_output_has "it takes whole UUIDs, not prefixes"
	NVIDIA_VISIBLE_DEVICES=0,GPU-8932f937 run "$VISDEV" --demo map --json
	[ "$(jq .nvidia_visible_devices.refused <<<"$output")" = true ]
	NVIDIA_VISIBLE_DEVICES=0,2 run "$VISDEV" --demo map
	[[ "$output" != *"refuses"* && "$output" != *"does not start"* ]]
}

@test "quotes kept in the value are pointed out" {
	CUDA_VISIBLE_DEVICES="'0,1'" run "$VISDEV" --demo map
	assert_status 0
	assert_output_has "quote characters"
	assert_output_has "CUDA sees no GPU"
}

@test "through the stand-in NVML, map gives the fixture backend's answers" {
	for v in 0 2,1 0,0 GPU-ffff ""; do
		want=$("$VISDEV" --fixture "$FIXTURES/mixed.json" map --json -- "$v")
		got=$(mock "$FIXTURES/mixed.json" map --json -- "$v")
		[ "$got" = "$want" ] || { diff <(echo "$want") <(echo "$got"); return 1; }
	done
}

@test "map --help prints the usage, exit 0" {
	run "$VISDEV" map --help
	assert_status 0
	assert_output_has "--logical LIST"
}

@test "bytes that are not UTF-8 never make a JSON key go missing" {
	run "$VISDEV" --demo --json map $'0,\xff'
	assert_status 0
	[ "$(jq -c '{value, stop: .stop.token}' <<<"$output")" = '{"value":"0,?","stop":"?"}' ]
	CUDA_VISIBLE_DEVICES=$'0,\xff' run "$VISDEV" --demo --json list
	[ "$(jq -r .cuda_visible_devices <<<"$output")" = "0,?" ]
	NVIDIA_VISIBLE_DEVICES=$'0,\xff' run "$VISDEV" --demo --json map
	[ "$(jq -r .nvidia_visible_devices.value <<<"$output")" = "0,?" ]
}
