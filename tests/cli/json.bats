#!/usr/bin/env bats
# The JSON of every command agrees with itself: one thing, one key, one value,
# whichever command prints it (docs/json.md).

load helper

# The keys of a JSON object, sorted, as one line.
keys_of() {
	jq -c 'keys'
}

@test "a device has the same keys and values in list, map, pick and a job's VISDEV_LEASE" {
	f=$FIXTURES/mig.json
	mig=$(jq -r '.gpus[0].mig[0].uuid' "$f")
	listed=$("$VISDEV" --fixture "$f" list --json | jq -c --arg u "$mig" \
		'.gpus[].mig[] | select(.uuid == $u) | {index, uuid, name, pci_bus_id, gi, ci, profile}')
	mapped=$("$VISDEV" --fixture "$f" map "$mig" --json | jq -c '.devices[0] | del(.cuda)')
	picked=$(CUDA_VISIBLE_DEVICES=$mig "$VISDEV" --fixture "$f" pick --json |
		jq -c '.devices[0] | del(.memory_free_mib)')
	leased=$(CUDA_VISIBLE_DEVICES=$mig "$VISDEV" --fixture "$f" run -- \
		sh -c 'printf "%s" "$VISDEV_LEASE"' | jq -c '.devices[0]')
	[ -n "$listed" ] && [ "$(keys_of <<<"$listed")" = '["ci","gi","index","name","pci_bus_id","profile","uuid"]' ]
	[ "$mapped" = "$listed" ] || { echo "map:  $mapped"; echo "list: $listed"; return 1; }
	[ "$picked" = "$listed" ] || { echo "pick: $picked"; return 1; }
	[ "$leased" = "$listed" ] || { echo "lease: $leased"; return 1; }
	# a whole GPU: the four keys, in list's GPU, map's devices and pick's reasons alike
	gpu=$("$VISDEV" --demo list --json | jq -c '.gpus[0] | {index, uuid, name, pci_bus_id}')
	[ "$("$VISDEV" --demo map 0 --order pci --json | jq -c '.devices[0] | del(.cuda)')" = "$gpu" ]
	[ "$("$VISDEV" --demo pick --json | jq -c '.reasons[] | select(.index == 0) | del(.reason, .why)')" = "$gpu" ]
}

@test "a lease has the same keys in list, leases and VISDEV_LEASE; the line the same in list and leases" {
	"$VISDEV" --demo run -n 2 -- sh -c 'printf "%s" "$VISDEV_LEASE" > lease.json; sleep 30' &
	job=$!
	wait_for test -s lease.json
	"$VISDEV" --demo run -n 2 --wait -- true &
	waiter=$!
	wait_for eval '[ "$("$VISDEV" --demo leases --json | jq ".line | length")" -eq 1 ]'
	in_list=$("$VISDEV" --demo list --json)
	in_leases=$("$VISDEV" --demo leases --json)
	kill "$waiter" "$job"
	want=$(jq -c 'del(.devices, .lease_dir) | keys' lease.json)
	[ "$want" = '["command","mem_mib","mode","pgid","pid","queue","since","uid","user"]' ]
	# list and leases add the lease audit's judgement of it (docs/json.md), the same in both
	[ "$(jq -c '[.gpus[].leases[] | del(.audit) | keys] | unique' <<<"$in_list")" = "[$want]" ]
	[ "$(jq -c '[.leases[] | del(.index, .uuid, .audit) | keys] | unique' <<<"$in_leases")" = "[$want]" ]
	[ "$(jq -c '[.gpus[].leases[].audit | .use, .squatters]' <<<"$in_list")" = '["quiet",0,"quiet",0]' ]
	[ "$(jq -c '[.leases[].audit | .use, .squatters]' <<<"$in_leases")" = '["quiet",0,"quiet",0]' ]
	# the values too: the same lease, wherever it is read
	[ "$(jq -c '[.gpus[].leases[] | del(.audit)]' <<<"$in_list")" = \
		"$(jq -c '[.leases[] | del(.index, .uuid, .audit)]' <<<"$in_leases")" ]
	[ "$(jq -c '.line' <<<"$in_list")" = "$(jq -c '.line' <<<"$in_leases")" ]
	[ "$(jq -r '.line[0].command' <<<"$in_list")" = true ]
	wait_for gone "$job"
}

@test "warnings are in list --json as in map --json, and pick's reasons are objects with a code" {
	export CUDA_VISIBLE_DEVICES=0,7 cuda_visible_devices=1
	listed=$("$VISDEV" --demo list --json | jq -c '.warnings')
	mapped=$("$VISDEV" --demo map --json | jq -c '.warnings')
	[ "$listed" = "$mapped" ]
	[ "$(jq 'length' <<<"$listed")" -ge 2 ]
	unset CUDA_VISIBLE_DEVICES cuda_visible_devices
	run --separate-stderr "$VISDEV" --demo pick -n 3 --json
	assert_status 3
	[ "$(jq -c '[.reasons[] | [.index, .reason]]' <<<"$output")" = '[[0,"busy"],[2,"busy"],[null,"too-few"]]' ]
	[ "$(jq -r '.reasons[0].why' <<<"$output")" = "busy with 1 process visdev did not start (pid 31842 python)" ]
	run --separate-stderr "$VISDEV" --demo pick --exclude 1 --model 'RTX*' --max-util 10 --json
	[ "$(jq -c '[.reasons[] | .reason]' <<<"$output")" = '["model","excluded","busy"]' ]
}
