#!/usr/bin/env bats
# visdev queue --slurm against a real Slurm: munged, slurmctld and slurmd
# started by tests/slurm/cluster on this host with four fake GPUs. Needs root
# (make check says so, and skips these, otherwise).

load ../cli/helper

setup_file() {
	[ "$(id -u)" -eq 0 ] || skip "needs root to start Slurm's daemons"
	export CLUSTER=$BATS_FILE_TMPDIR/cluster
	"$BATS_TEST_DIRNAME/cluster" start "$CLUSTER" >"$BATS_FILE_TMPDIR/env" || return 1
	export SLURM_CONF=$CLUSTER/slurm.conf
}

teardown_file() {
	[ -z "${CLUSTER:-}" ] || "$BATS_TEST_DIRNAME/cluster" stop "$CLUSTER"
}

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	unset CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER
}

teardown() {
	scancel --user=root 2>/dev/null
	return 0
}

# Waits up to $2 s (default 60) for a shell condition to hold: Slurm is slower than a lease.
wait_long() {
	local cmd=$1
	for _ in $(seq $((${2:-60} * 5))); do
		eval "$cmd" 2>/dev/null && return 0
		sleep 0.2
	done
	echo "timed out waiting for: $cmd" >&2
	return 1
}

@test "a 40-job sweep, one GPU a job, on 4 GPUs: no GPU twice at once, each job in PCI order" {
	# each job marks its GPU (mkdir fails if another holds it) and says what it saw
	cat >job.sh <<'JOB'
g=$CUDA_VISIBLE_DEVICES
mkdir "$1/gpu-$g" || { echo "GPU $g twice" >>"$1/overlaps"; exit 9; }
echo "$VISDEV_JOB_INDEX $g $CUDA_DEVICE_ORDER" >>"$1/seen"
sleep 0.3
rmdir "$1/gpu-$g"
JOB
	mkdir marks
	for i in $(seq 40); do echo "sh $PWD/job.sh $PWD/marks"; done >jobs.txt
	run "$VISDEV" queue --slurm -n 1 jobs.txt
	assert_status 0
	[[ "$output" == *"40 jobs: 40 done, 0 failed, 0 lost, 0 not run"* ]]
	[ ! -e marks/overlaps ]
	[ "$(wc -l <marks/seen)" -eq 40 ]
	[ "$(cut -d' ' -f1 marks/seen | sort -n | uniq | wc -l)" -eq 40 ]
	[ "$(cut -d' ' -f3 marks/seen | sort -u)" = PCI_BUS_ID ]
	# the four GPUs were all used, and only they
	[ "$(cut -d' ' -f2 marks/seen | sort -u | tr '\n' ' ')" = "0 1 2 3 " ]
	# each task's journal: the node and the GPUs as Slurm gave them
	run "$VISDEV" queue --status jobs.txt.slurm --json
	assert_status 0
	[ "$(jq '.counts.done' <<<"$output")" -eq 40 ]
	[ "$(jq -r '[.jobs[].node] | unique | .[]' <<<"$output")" = "$(hostname -s)" ]
	[ "$(jq -r '[.jobs[].cuda_visible_devices] | unique | join(",")' <<<"$output")" = 0,1,2,3 ]
	[ "$(jq -r '.active' <<<"$output")" = false ]
}

@test "a failing job makes the exit status 1, the others finish; its output is in the state folder" {
	printf 'true\necho out; echo err >&2; exit 3\ntrue\n' >jobs.txt
	run "$VISDEV" queue --slurm jobs.txt
	assert_status 1
	[[ "$output" == *"3 jobs: 2 done, 1 failed, 0 lost, 0 not run"* ]]
	[[ "$output" == *"job 1 failed with status 3 on $(hostname -s): $PWD/jobs.txt.slurm/out/1.err"* ]]
	[ "$(cat jobs.txt.slurm/out/1.out)" = out ]
	[ "$(cat jobs.txt.slurm/out/1.err)" = err ]
	[ "$("$VISDEV" queue --status jobs.txt.slurm --json | jq -c '[.jobs[].state]')" = '["done","failed","done"]' ]
}

@test "scancel some tasks, then --resume runs exactly those" {
	for i in 0 1 2 3 4 5; do
		if [ $i = 2 ] || [ $i = 4 ]; then echo "echo $i >>$PWD/ran; sleep 300"; else echo "echo $i >>$PWD/ran"; fi
	done >jobs.txt
	run "$VISDEV" queue --slurm --detach jobs.txt
	assert_status 0
	wait_long '[ "$(sort -n ran | tr "\n" " ")" = "0 1 2 3 4 5 " ]'
	array=$(jq -r '.arrays[0].id' jobs.txt.slurm/queue.json)
	scancel "${array}_2" "${array}_4"
	wait_long '[ "$("$VISDEV" queue --status jobs.txt.slurm --json | jq .active)" = false ]'
	[ "$("$VISDEV" queue --status jobs.txt.slurm --json | jq -c '[.jobs[] | select(.state != "done") | .job]')" = '[2,4]' ]
	# the jobs as they are now: the two sleepers made quick (the file changed, hence --force)
	sed -i 's/; sleep 300//' jobs.txt
	run "$VISDEV" queue --resume jobs.txt.slurm
	assert_status 1
	[[ "$output" == *"changed since the sweep was submitted: --force"* ]]
	: >ran
	run "$VISDEV" queue --resume --force jobs.txt.slurm
	assert_status 0
	[ "$(sort -n ran | tr '\n' ' ')" = "2 4 " ]
	[ "$(jq '.arrays | length' jobs.txt.slurm/queue.json)" -eq 2 ]
	[ "$(jq -r '.arrays[1].indices' jobs.txt.slurm/queue.json)" = 2,4 ]
	run "$VISDEV" queue --resume jobs.txt.slurm
	assert_status 0
	[[ "$output" == *"nothing to resume"* ]]
	# a job file that is no longer one is said, not passed over
	printf 'true\0\n' >jobs.txt
	run "$VISDEV" queue --resume jobs.txt.slurm
	assert_status 2
	[[ "$output" == *"jobs.txt: line 1: a NUL byte: this is not a text file"* ]]
}

@test "a grid on Slurm, --cancel, and a sweep larger than MaxArraySize split into arrays" {
	run "$VISDEV" queue --slurm --template 'echo {a}-{b} >>'"$PWD"'/grid' --grid a=1,2 --grid b=x,y \
		--state g.slurm
	assert_status 0
	[ "$(sort grid | tr '\n' ' ')" = "1-x 1-y 2-x 2-y " ]
	[ "$(jq -r .name g.slurm/queue.json)" = grid ]
	# --cancel
	printf 'sleep 300\nsleep 300\n' >long.txt
	"$VISDEV" queue --slurm --detach long.txt
	wait_long '[ "$("$VISDEV" queue --status long.txt.slurm --json | jq .counts.running)" -eq 2 ]'
	run "$VISDEV" queue --cancel long.txt.slurm
	assert_status 0
	wait_long '[ "$("$VISDEV" queue --status long.txt.slurm --json | jq .active)" = false ]'
	[ "$(squeue -h | wc -l)" -eq 0 ]
	# the test cluster's MaxArraySize is 1001: 1,005 jobs are two arrays, said on stderr
	seq 1005 | sed 's/^/true # /' >many.txt
	run --separate-stderr "$VISDEV" queue --slurm --detach many.txt
	assert_status 0
	[[ "$stderr" == *"1005 jobs go to Slurm as 2 arrays: its MaxArraySize is 1001"* ]]
	[ "$(jq -c '[.arrays[] | [.offset, .jobs, .indices]]' many.txt.slurm/queue.json)" = '[[0,1001,"0-1000"],[1001,4,"0-3"]]' ]
	"$VISDEV" queue --cancel many.txt.slurm
}

@test "--retries submits a failed job again while following; Ctrl-C only detaches" {
	# fails the first time, succeeds the second
	echo "test -e $PWD/tried || { touch $PWD/tried; exit 1; }" >flaky.txt
	run "$VISDEV" queue --slurm --retries 1 flaky.txt
	assert_status 0
	[[ "$output" == *"1 job: 1 done, 0 failed"* ]]
	[ "$("$VISDEV" queue --status flaky.txt.slurm --json | jq '.jobs[0].starts')" -eq 2 ]
	[ "$(jq '.arrays | length' flaky.txt.slurm/queue.json)" -eq 2 ]
	# Ctrl-C while following: the jobs are Slurm's and go on
	printf 'sleep 300\n' >long.txt
	run --separate-stderr timeout --preserve-status -s INT 5 "$VISDEV" queue --slurm long.txt
	assert_status 130
	[[ "$stderr" == *"detached: the jobs are Slurm's and go on. 'visdev queue --status $PWD/long.txt.slurm' shows them, 'visdev queue --cancel $PWD/long.txt.slurm' cancels them"* ]]
	[ "$("$VISDEV" queue --status long.txt.slurm --json | jq .active)" = true ]
	"$VISDEV" queue --cancel long.txt.slurm
}

@test "resume with --max-parallel over a long list of jobs, and of a job file that grew" {
	# the odd jobs fail the first time
	for i in $(seq 0 39); do
		echo "echo $i >>$PWD/ran; [ \$(($i % 2)) = 0 ] || [ -e $PWD/again ]"
	done >jobs.txt
	run "$VISDEV" queue --slurm --max-parallel 4 jobs.txt
	assert_status 1
	[[ "$output" == *"40 jobs: 20 done, 20 failed"* ]]
	touch again
	: >ran
	run "$VISDEV" queue --resume --max-parallel 2 jobs.txt.slurm
	assert_status 0
	# the whole list went to sbatch, %2 and all
	[ "$(jq -r '.arrays[1].indices' jobs.txt.slurm/queue.json)" = "$(seq 1 2 39 | paste -sd,)" ]
	[ "$(sort -n ran | paste -sd,)" = "$(seq 1 2 39 | paste -sd,)" ]
	# two more jobs: with --force they run, and only they
	echo "echo 40 >>$PWD/ran" >>jobs.txt
	echo "echo 41 >>$PWD/ran" >>jobs.txt
	: >ran
	run "$VISDEV" queue --resume --force jobs.txt.slurm
	assert_status 0
	[ "$(sort -n ran | paste -sd,)" = 40,41 ]
	[[ "$output" == *"42 jobs: 42 done"* ]]
}

@test "a state folder others can write to is refused; --sbatch-arg may not choose the cluster or the array" {
	echo true >jobs.txt
	mkdir -m 777 open
	chmod 777 open
	run "$VISDEV" queue --slurm --state open jobs.txt
	assert_status 1
	[[ "$output" == *"the state folder 'open' must be a folder of yours that nobody else can write to"* ]]
	run "$VISDEV" queue --slurm --sbatch-arg=-M --sbatch-arg=other jobs.txt
	assert_status 2
	[[ "$output" == *"--sbatch-arg -M: visdev makes the array itself, on the cluster squeue answers for"* ]]
	run "$VISDEV" queue --slurm --sbatch-arg=--array=0-3 jobs.txt
	assert_status 2
}

@test "sbatch missing from PATH: a clear error, nothing written" {
	echo true >jobs.txt
	run env PATH=/nonexistent "$VISDEV" queue --slurm jobs.txt
	assert_status 1
	[[ "$output" == *"sbatch is not on PATH: --slurm needs Slurm's commands"* ]]
	[ ! -e jobs.txt.slurm ]
	# and what means nothing to Slurm is refused
	run "$VISDEV" queue --slurm --mem 10G jobs.txt
	assert_status 2
	[[ "$output" == *"--mem is for a local queue"* ]]
	run "$VISDEV" queue --partition debug jobs.txt
	assert_status 2
	[[ "$output" == *"--partition is for a sweep on Slurm: add --slurm"* ]]
}

@test "sbatch refusing: Slurm's own message, exit 1, and nothing recorded as submitted" {
	printf 'true\ntrue\n' >jobs.txt
	run "$VISDEV" queue --slurm --partition nosuch jobs.txt
	assert_status 1
	[[ "$output" == *"sbatch failed: sbatch: error: "*"artition"* ]]
	[ "$(jq '.arrays | length' jobs.txt.slurm/queue.json)" -eq 0 ]
	[ "$(squeue -h | wc -l)" -eq 0 ]
	# its status says nothing ran
	[ "$("$VISDEV" queue --status jobs.txt.slurm --json | jq -c .counts)" = '{"not-run":2,"queued":0,"running":0,"done":0,"failed":0,"lost":0}' ]
}
