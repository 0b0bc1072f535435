#!/usr/bin/env bats
# tests/gpu/check, the prepared check for machines with a GPU, run here against the
# stand-in NVML and libcuda and a stand-in nvidia-smi, so that it works when a GPU is at hand.

load helper

CHECK=${VISDEV%/visdev}/tests/gpu/check

setup_file() {
	mkdir -p "$BATS_FILE_TMPDIR/bin"
}

# A stand-in nvidia-smi answering for tests/fixtures/one.json, with memory $1.
fake_smi() {
	cat >"$BATS_FILE_TMPDIR/bin/nvidia-smi" <<SMI
#!/bin/sh
[ "\$1" = -L ] && { echo "GPU 0: NVIDIA H100 80GB HBM3"; exit 0; }
echo "0, GPU-9f8e7d6c-5b4a-4938-8271-605f4e3d2c1b, NVIDIA H100 80GB HBM3, 00000000:18:00.0, $1"
SMI
	chmod +x "$BATS_FILE_TMPDIR/bin/nvidia-smi"
}

check() {
	PATH=$BATS_FILE_TMPDIR/bin:$PATH MOCK_NVML_FIXTURE=$FIXTURES/one.json \
		VISDEV_NVML_LIB=$MOCK_NVML_DIR/libnvidia-ml.so.1 \
		VISDEV_CUDA_LIB=$MOCK_NVML_DIR/libcuda.so.1 "$CHECK" "$VISDEV"
}

@test "the check compares list with nvidia-smi field by field" {
	fake_smi 81559
	run check
	[ "$(grep -c '^list: .*| agree$' <<<"$output")" -eq 6 ]
	[[ "$(grep "^map pci '0' " <<<"$output")" == *"| agree" ]]
}

@test "the check reports a disagreement and fails" {
	fake_smi 40000
	run check
	assert_status 1
	[[ "$(grep '^list: GPU 0 memory_total_mib' <<<"$output")" == *"| DISAGREE" ]]
	assert_output_has "disagreement"
}

@test "without a GPU the prepared check skips, exit 77" {
	# a PATH with no nvidia-smi, whatever this machine has
	mkdir -p nosmi && ln -sf "$(command -v dirname)" nosmi/dirname
	PATH=$PWD/nosmi run "$BATS_TEST_DIRNAME/../gpu/check"
	assert_status 77
	assert_output_has "skip: no NVIDIA GPU here"
}

@test "the check takes a driver that refuses a device named twice as agreeing with visdev" {
	fake_smi 81559
	run check
	[[ "$(grep "^map pci '0,0' " <<<"$output")" == *"(named twice: no GPU) "*"(named twice: no GPU) "*"| agree" ]]
	# a driver that fails for another reason does not agree
	MOCK_CUDA_FAIL=1 run check
	[[ "$(grep "^map pci '0,0' " <<<"$output")" == *"CUDA_ERROR_UNKNOWN"*"| DISAGREE" ]]
}
