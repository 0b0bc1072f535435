#!/usr/bin/env bats
# visdev doctor: each check on fixtures with a constructed environment,
# start-up files in a temporary HOME, scripts written here (with decoys that
# must not be flagged), --pid on a child with a known environment, exit codes.

load helper

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	unset CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER NVIDIA_VISIBLE_DEVICES VISDEV_FIXTURE
	unset SLURM_JOB_GPUS SLURM_STEP_GPUS
	export VISDEV_NVML_LIB=$BATS_TEST_TMPDIR/no-such-libnvidia-ml.so.1
	export VISDEV_LEASE_DIR=$BATS_TEST_TMPDIR/leases XDG_CACHE_HOME=$BATS_TEST_TMPDIR/cache
	export HOME=$BATS_TEST_TMPDIR/home
	mkdir -p "$HOME"
	# the order of the demo is pinned, so that only the finding under test shows
	export CUDA_DEVICE_ORDER=PCI_BUS_ID
}

# The findings' ids, one a line, of `visdev doctor` with the arguments given.
ids() {
	"$VISDEV" "$@" doctor --json | jq -r '.findings[].id'
}

@test "a clean environment on a simulated server: no error, exit 0, and JSON with every key" {
	run "$VISDEV" --demo doctor
	assert_status 0
	assert_output_has "doctor: nothing wrong found"
	run "$VISDEV" --demo doctor --json
	assert_status 0
	[ "$(jq -c '[.findings[0] | keys[]]' <<<"$output")" = '["fix","id","message","severity","where"]' ]
	[ "$(jq -r '[.findings[].severity] | unique | join(",")' <<<"$output")" = info ]
}

@test "the variable itself: past the last GPU, nothing visible, unknown and ambiguous UUIDs, quotes, a blank" {
	for case in "0,9:visible-out-of-range" "0,1,0:visible-duplicate" "GPU-ffff:visible-uuid-unknown" \
		"GPU-:visible-uuid-unknown" "'0,1':visible-quotes" " GPU-8932f937:visible-blank" \
		":visible-empty" "0,-1:visible-cut"; do
		value=${case%:*} want=${case##*:}
		got=$(CUDA_VISIBLE_DEVICES=$value ids --demo | grep -v simulated | head -1)
		[ "$got" = "$want" ] || { echo "'$value': got '$got', want '$want'"; return 1; }
	done
	CUDA_VISIBLE_DEVICES=0,9 run "$VISDEV" --demo doctor
	assert_status 1
	assert_output_has "element 2 ('9') is past the last GPU, there being 4"
	assert_output_has "fix: name GPUs 0 to 3"
	# an ambiguous prefix: two GPUs of the fixture begin alike
	[ "$(jq -r '[.gpus[].uuid | select(startswith("GPU-7"))] | length' "$FIXTURES/engine.json")" -gt 1 ]
	[ "$(CUDA_VISIBLE_DEVICES=GPU-7 ids --fixture "$FIXTURES/engine.json" | grep -c visible-uuid-ambiguous)" -eq 1 ]
	# MIG limits for the driver in use: two MIG devices before R570
	migs=$(jq -r '[.gpus[0].mig[].uuid] | join(",")' "$FIXTURES/mig.json")
	[ "$(CUDA_VISIBLE_DEVICES=$migs ids --fixture "$FIXTURES/mig.json" | grep -c visible-mig)" -ge 1 ]
}

@test "near-miss names: a misspelling, lower case, a letter short" {
	for name in CUDA_VISBLE_DEVICES cuda_visible_devices CUDA_VISIBLE_DEVICE CUDA_DEVICE_ORDR; do
		run env "$name=1" "$VISDEV" --demo doctor --json
		assert_status 1
		[ "$(jq -r '.findings[] | select(.id == "name-near-miss") | .where' <<<"$output")" = "the environment" ]
		jq -e --arg n "$name" '.findings[] | select(.message | startswith("'"'"'" + $n + "'"'"' is set"))' <<<"$output" >/dev/null
	done
	# a name that only looks alike from afar is left alone
	[ -z "$(CUDA_VISIBLE_THINGS=1 ids --demo | grep name-near-miss)" ]
}

@test "the order trap: CUDA_DEVICE_ORDER unset on a server with several models, both numberings shown" {
	unset CUDA_DEVICE_ORDER
	run "$VISDEV" --demo doctor --json
	assert_status 0
	msg=$(jq -r '.findings[] | select(.id == "order-fastest-first") | .message' <<<"$output")
	[[ "$msg" == *"ordinal 0 is GPU 2 (NVIDIA GeForce RTX 3090), ordinal 1 is GPU 0 (Tesla V100-SXM2-32GB)"* ]]
	[ "$(jq -r '.findings[] | select(.id == "order-fastest-first") | .fix' <<<"$output")" = \
		"export CUDA_DEVICE_ORDER=PCI_BUS_ID, so that ordinals count as nvidia-smi's do" ]
	# one model only: no trap
	[ -z "$(ids --fixture "$FIXTURES/eight.json" | grep order-fastest-first)" ]
}

@test "NVIDIA_VISIBLE_DEVICES and Slurm's GPUs against CUDA_VISIBLE_DEVICES" {
	[ "$(NVIDIA_VISIBLE_DEVICES=0,1 CUDA_VISIBLE_DEVICES=2 ids --demo | grep -c container-disagree)" -eq 1 ]
	[ -z "$(NVIDIA_VISIBLE_DEVICES=0,1 CUDA_VISIBLE_DEVICES=1 ids --demo | grep container-disagree)" ]
	[ "$(SLURM_STEP_GPUS=2,3 ids --demo | grep -c slurm-unset)" -eq 1 ]
	[ "$(SLURM_JOB_GPUS=2,3 CUDA_VISIBLE_DEVICES=0 ids --demo | grep -c slurm-count)" -eq 1 ]
	# Slurm's renumbering under cgroups, or its own indices, in PCI order: nothing to say
	[ -z "$(SLURM_JOB_GPUS=2,3 CUDA_VISIBLE_DEVICES=0,1 CUDA_DEVICE_ORDER=PCI_BUS_ID ids --demo | grep slurm)" ]
	[ -z "$(SLURM_JOB_GPUS=2,3 CUDA_VISIBLE_DEVICES=2,3 CUDA_DEVICE_ORDER=PCI_BUS_ID ids --demo | grep slurm)" ]
	# other GPUs than Slurm's
	[ "$(SLURM_JOB_GPUS=2,3 CUDA_VISIBLE_DEVICES=1,3 CUDA_DEVICE_ORDER=PCI_BUS_ID ids --demo | grep -c slurm-disagree)" -eq 1 ]
	# the trap: the demo's GPUs differ, and CUDA would count fastest first
	unset CUDA_DEVICE_ORDER CUDA_VISIBLE_DEVICES SLURM_JOB_GPUS
	[ "$(SLURM_JOB_GPUS=2,3 CUDA_VISIBLE_DEVICES=2,3 ids --demo | grep -c slurm-order)" -eq 1 ]
	# one model on the node: no trap
	[ -z "$(SLURM_JOB_GPUS=0,1 CUDA_VISIBLE_DEVICES=0,1 ids --fixture "$FIXTURES/four.json" | grep slurm)" ]
}

@test "the shell's start-up files: an export of the variable, with its line, and its value checked" {
	cat >"$HOME/.bashrc" <<'EOF'
# my settings
export PATH=$PATH:$HOME/bin
export CUDA_VISIBLE_DEVICES=2
CUDA_VISIBLE_DEVICES=0 python one-command.py
# export CUDA_VISIBLE_DEVICES=3
echo "export CUDA_VISIBLE_DEVICES=1"
EOF
	printf 'setenv CUDA_VISIBLE_DEVICES 0,7\n' >"$HOME/.cshrc"
	printf 'export cuda_visible_devices=1\n' >"$HOME/.profile"
	run "$VISDEV" --demo doctor --json
	assert_status 1
	[ "$(jq -r '[.findings[] | select(.id == "startup-export") | .where] | join(" ")' <<<"$output")" = \
		"~/.bashrc:3 ~/.cshrc:1" ]
	[ "$(jq -r '.findings[] | select(.id == "visible-out-of-range") | .where' <<<"$output")" = "~/.cshrc:1" ]
	[ "$(jq -r '.findings[] | select(.id == "name-near-miss") | .where' <<<"$output")" = "~/.profile:1" ]
}

@test "--script: set after import torch, too late after CUDA started, device numbers past what it sees; decoys left alone" {
	cat >train.py <<'EOF'
import os
# os.environ["CUDA_VISIBLE_DEVICES"] = "7"
print("os.environ['CUDA_VISIBLE_DEVICES'] = '9'")
doc = """torch.cuda.init() and os.environ["CUDA_VISIBLE_DEVICES"] = "5" in a string"""
os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"
import torch
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "1")
model = torch.nn.DataParallel(model, device_ids=[0, 1])
x = torch.zeros(3).cuda()
os.environ["CUDA_VISIBLE_DEVICES"] = "3"
os.putenv("CUDA_VISBLE_DEVICES", "0")
y = x.to("cuda:2")
torch.cuda.set_device(1)
EOF
	run "$VISDEV" --demo doctor --script train.py --json
	assert_status 1
	got=$(jq -r '[.findings[] | select(.where | startswith("train.py")) | "\(.where) \(.id)"] | join("\n")' <<<"$output")
	want='train.py:7 script-after-import
train.py:10 script-too-late
train.py:11 name-near-miss
train.py:12 script-device-ordinal'
	[ "$got" = "$want" ] || { echo "$got"; return 1; }
	# the script sees 2 GPUs ("0,1", line 5): cuda:2 is past them, set_device(1) and device_ids are not
	assert_output_has "the script will see 2 GPUs (CUDA_VISIBLE_DEVICES='0,1', set at line 5)"
}

@test "--script: the environment's value when the script sets none; files that are not Python, not UTF-8, missing" {
	printf 'import torch\nmodel.to("cuda:1")\n' >uses.py
	CUDA_VISIBLE_DEVICES=3 run "$VISDEV" --demo doctor --script uses.py
	assert_status 1
	assert_output_has "'cuda:1', but the script will see 1 GPU (CUDA_VISIBLE_DEVICES='3' in the environment)"
	printf 'echo hi\n' >run.sh
	printf '#!/usr/bin/env python3\nimport torch\ntorch.cuda.set_device(9)\n' >noext
	printf 'x = "caf\xe9"\n' >latin1.py
	printf 'a\0b' >nul.py
	run "$VISDEV" --demo doctor --script run.sh --script noext --script latin1.py --script nul.py \
		--script missing.py --json
	assert_status 1
	[ "$(jq -r '[.findings[] | select(.id | startswith("script")) | .id] | join(" ")' <<<"$output")" = \
		"script-not-python script-device-ordinal script-not-utf8 script-not-text script-unreadable" ]
}

@test "--pid: what a running process sees, the GPU it uses, and the order that put it there" {
	unset CUDA_DEVICE_ORDER
	# a process that asked for ordinal 1, counted fastest first: GPU 0 on the demo, not GPU 1
	CUDA_VISIBLE_DEVICES=1 sleep 60 &
	pid=$!
	jq --argjson p "$pid" '.gpus[0].processes += [{"pid": $p, "used_mib": 100, "name": "sleep"}]' \
		"$BATS_TEST_DIRNAME/../../src/lib/demo.json" >with-pid.json
	run "$VISDEV" --fixture with-pid.json doctor --pid "$pid" --json
	kill "$pid"
	[ "$(jq -r '.findings[] | select(.id == "pid-gpus") | .message' <<<"$output")" = \
		"pid $pid uses GPU 0 (Tesla V100-SXM2-32GB)" ]
	[[ "$(jq -r '.findings[] | select(.id == "pid-wrong-gpu") | .message' <<<"$output")" == \
		"pid $pid runs on GPU 0, not GPU 1: its CUDA_VISIBLE_DEVICES='1' is counted fastest first"* ]]
	run "$VISDEV" --demo doctor --pid nope --pid 999999999
	assert_status 1
	assert_output_has "'nope' is not a process id"
	assert_output_has "cannot read the environment of pid 999999999: no such process"
}

@test "the machine, with no driver: NVML and libcuda missing are errors with the fix" {
	unset CUDA_DEVICE_ORDER
	run "$VISDEV" doctor --json
	assert_status 1
	[ "$(jq -r '.findings[] | select(.id == "nvml-missing") | .severity' <<<"$output")" = error ]
	jq -e '.findings[] | select(.id == "nvml-missing") | .fix | test("install the NVIDIA driver")' <<<"$output"
	# through the stand-in NVML: the driver's pieces are looked at
	VISDEV_CUDA_LIB=$BATS_TEST_TMPDIR/none.so MOCK_NVML_FIXTURE=$FIXTURES/four.json \
		run "$VISDEV" --nvml-lib "$MOCK_NVML_DIR/libnvidia-ml.so.1" doctor --json
	[ "$(jq -r '.findings[] | select(.id == "cuda-missing") | .where' <<<"$output")" = "$BATS_TEST_TMPDIR/none.so" ]
	jq -e '.findings[] | select(.id == "driver")' <<<"$output"
}

@test "the lease directory: unsafe or unwritable is an error; usage mistakes" {
	mkdir -m 777 open
	VISDEV_LEASE_DIR=$PWD/open run "$VISDEV" --demo doctor --json
	assert_status 1
	jq -e '.findings[] | select(.id == "leases-unusable")' <<<"$output"
	# a record of a lease that ended (nobody holds it): said, harmless
	"$VISDEV" --demo leases >/dev/null
	echo '{}' >"$VISDEV_LEASE_DIR/lease.99999.0.json"
	run "$VISDEV" --demo doctor --json
	[ "$(jq -r '.findings[] | select(.id == "leases-stale") | .message' <<<"$output")" = \
		"1 record of leases that have ended: harmless, tidied away by the next lease taken here" ]
	# the container runtime's variable marks a container
	NVIDIA_VISIBLE_DEVICES=all VISDEV_CUDA_LIB=$BATS_TEST_TMPDIR/none.so MOCK_NVML_FIXTURE=$FIXTURES/four.json \
		run "$VISDEV" --nvml-lib "$MOCK_NVML_DIR/libnvidia-ml.so.1" doctor --json
	jq -e '.findings[] | select(.id == "container-leases")' <<<"$output"
	run "$VISDEV" --demo doctor extra
	assert_status 2
	assert_output_has "doctor takes no arguments ('extra' given)"
	run "$VISDEV" --demo doctor --help
	assert_status 0
	assert_output_has "usage: visdev doctor"
}
