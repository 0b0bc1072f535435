/*
 * test_fixture.c - the fixture parser, its messages, the fixture and demo
 * backends. Run from the top of the tree: fixtures are read by relative path.
 */
#include <glob.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "internal.h"

/* ---- Malformed fixtures: code and exact message ------------------------- */

/*
 * Most cases start with HEAD G1, which fill columns 1 to 60 of the line: a
 * key written right after it, as `, "key": `, starts at column 63.
 */
#define HEAD "{\"gpus\": ["
#define G1   "{\"uuid\": \"GPU-1\", \"name\": \"n\", \"pci_bus_id\": \"b\""
#define G2   "{\"uuid\": \"GPU-2\", \"name\": \"n\", \"pci_bus_id\": \"c\""

struct bad_case {
	const char *text; /* the fixture, or in bad_files its path */
	const char *message;
};

/*
 * One line each (columns are easy to count); the name in messages is
 * "t.json". Every case gives VD_EPARSE and exactly this message.
 */
static const struct bad_case bad_texts[] = {
	/* the document */
	{ "", "t.json:1:1: empty fixture: expected a JSON object with a 'gpus' array" },
	{ "  \n\t ", "t.json:2:3: empty fixture: expected a JSON object with a 'gpus' array" },
	{ "42", "t.json:1:1: expected a JSON object with a 'gpus' array, got an integer" },
	{ "  \"gpus\"", "t.json:1:3: expected a JSON object with a 'gpus' array, got a string" },
	{ "{}", "t.json:1:1: missing required key 'gpus'" },
	{ "{\"gpus\": [], \"gpu\": []}", "t.json:1:14: unknown key 'gpu' (did you mean 'gpus'?)" },
	{ "{\"gpus\": {}}", "t.json:1:10: gpus: expected an array, got an object" },
	{ "{\"gpus\": null}", "t.json:1:10: gpus: expected an array, got null" },
	{ "{\"gpus\": [], \"driver_version\": 550}",
	  "t.json:1:32: driver_version: expected a string, got an integer" },
	{ "{\"gpus\": [], \"driver_version\": \"0123456789012345678901234567890123\"}",
	  "t.json:1:32: driver_version: too long: 34 bytes, at most 31" },
	{ "{\"gpus\": [], \"cuda_driver_version\": -1}",
	  "t.json:1:37: cuda_driver_version: expected a non-negative integer, got -1" },
	{ "{\"gpus\": [], \"cuda_driver_version\": 12.4}",
	  "t.json:1:37: cuda_driver_version: expected a non-negative integer, got a real number" },
	/* syntax, from jansson */
	{ "{\"gpus\": [],}", "t.json:1:13: string or '}' expected near '}'" },
	{ "{\"gpus\": []} x", "t.json:1:14: end of file expected near 'x'" },
	{ "{\"gpus\": [], \"gpus\": []}", "t.json:1:19: duplicate object key near '\"gpus\"'" },
	{ "{\"gpus\": [{\"name\": \"\\u0000\"}]}",
	  "t.json:1:27: \\u0000 is not allowed without JSON_ALLOW_NUL near '\"\\u0000\"'" },
	/* a GPU */
	{ "{\"gpus\": [1]}", "t.json:1:11: gpus[0]: expected an object, got an integer" },
	{ "{\"gpus\": [{\"name\": \"n\", \"pci_bus_id\": \"b\"}]}",
	  "t.json:1:11: gpus[0]: missing required key 'uuid'" },
	{ "{\"gpus\": [{\"uuid\": \"GPU-1\", \"pci_bus_id\": \"b\"}]}",
	  "t.json:1:11: gpus[0]: missing required key 'name'" },
	{ "{\"gpus\": [{\"uuid\": \"GPU-1\", \"name\": \"n\"}]}",
	  "t.json:1:11: gpus[0]: missing required key 'pci_bus_id'" },
	{ "{\"gpus\": [{\"uuid\": \"MIG-1\", \"name\": \"n\", \"pci_bus_id\": \"b\"}]}",
	  "t.json:1:20: gpus[0].uuid: expected a UUID that starts with 'GPU-', got 'MIG-1'" },
	{ "{\"gpus\": [{\"uuid\": \"GPU-\", \"name\": \"n\", \"pci_bus_id\": \"b\"}]}",
	  "t.json:1:20: gpus[0].uuid: expected a UUID that starts with 'GPU-', got 'GPU-'" },
	{ "{\"gpus\": [{\"uuid\": \"GPU-1,2\", \"name\": \"n\", \"pci_bus_id\": \"b\"}]}",
	  "t.json:1:20: gpus[0].uuid: 'GPU-1,2' cannot be named in CUDA_VISIBLE_DEVICES: a UUID is "
	  "printable ASCII without blanks or ','" },
	{ "{\"gpus\": [{\"uuid\": \"GPU-1 2\", \"name\": \"n\", \"pci_bus_id\": \"b\"}]}",
	  "t.json:1:20: gpus[0].uuid: 'GPU-1 2' cannot be named in CUDA_VISIBLE_DEVICES: a UUID is "
	  "printable ASCII without blanks or ','" },
	{ "{\"gpus\": [{\"uuid\": 7, \"name\": \"n\", \"pci_bus_id\": \"b\"}]}",
	  "t.json:1:20: gpus[0].uuid: expected a non-empty string, got an integer" },
	{ "{\"gpus\": [{\"uuid\": \"GPU-1\", \"name\": \"\", \"pci_bus_id\": \"b\"}]}",
	  "t.json:1:37: gpus[0].name: expected a non-empty string, got \"\"" },
	{ "{\"gpus\": [{\"uuid\": \"GPU-1\", \"name\": \"n\", \"pci_bus_id\": "
	  "\"0123456789012345678901234567890123\"}]}",
	  "t.json:1:56: gpus[0].pci_bus_id: too long: 34 bytes, at most 31" },
	{ HEAD G1 ", \"utilization_gpu\": 101}]}",
	  "t.json:1:80: gpus[0].utilization_gpu: expected an integer from 0 to 100, got 101" },
	{ HEAD G1 ", \"utilization_gpu\": -1}]}",
	  "t.json:1:80: gpus[0].utilization_gpu: expected an integer from 0 to 100, got -1" },
	{ HEAD G1 ", \"utilization_gpu\": 50.5}]}",
	  "t.json:1:80: gpus[0].utilization_gpu: expected an integer from 0 to 100, got a real "
	  "number" },
	{ HEAD G1 ", \"temperature_c\": -5}]}",
	  "t.json:1:78: gpus[0].temperature_c: expected a non-negative integer, got -5" },
	{ HEAD G1 ", \"numa_node\": true}]}",
	  "t.json:1:74: gpus[0].numa_node: expected a non-negative integer, got true" },
	{ HEAD G1 ", \"power_w\": \"70\"}]}",
	  "t.json:1:72: gpus[0].power_w: expected a non-negative number, got a string" },
	{ HEAD G1 ", \"power_w\": -0.5}]}",
	  "t.json:1:72: gpus[0].power_w: expected a number of watts from 0 to 4294967, got -0.5" },
	{ HEAD G1 ", \"lost\": \"yes\"}]}",
	  "t.json:1:69: gpus[0].lost: expected true or false, got a string" },
	{ HEAD G1 ", \"cuda_rnk\": 0}]}",
	  "t.json:1:61: gpus[0]: unknown key 'cuda_rnk' (did you mean 'cuda_rank'?)" },
	{ HEAD G1 ", \"memory_total_mib\": 8}]}",
	  "t.json:1:61: gpus[0]: memory_total_mib without memory_used_mib: give both or neither" },
	{ HEAD G1 ", \"memory_used_mib\": 8}]}",
	  "t.json:1:61: gpus[0]: memory_used_mib without memory_total_mib: give both or neither" },
	/* the second GPU, on the second line */
	{ HEAD G1 "},\n  {\"uuid\": \"GPU-1\", \"name\": \"n\", \"pci_bus_id\": \"c\"}]}",
	  "t.json:2:12: gpus[1].uuid: 'GPU-1' is already the UUID of gpus[0]" },
	/* CRLF line ends, keys written with escapes, characters of several bytes */
	{ HEAD G1 "},\r\n  {\"\\u0075uid\": \"GPU-1\", \"name\": \"n\", \"pci_bus_id\": \"c\"}]}",
	  "t.json:2:17: gpus[1].uuid: 'GPU-1' is already the UUID of gpus[0]" },
	{ "{\"gpus\": [{\"name\": \"\xc3\xa9\xe2\x82\xac\", \"pci_bus_id\": 5}]}",
	  "t.json:1:40: gpus[0].pci_bus_id: expected a non-empty string, got an integer" },
	/* ranks: a permutation of 0..n-1 over the GPUs that have one */
	{ HEAD G1 ", \"cuda_rank\": 0}, " G2 ", \"cuda_rank\": 2}]}",
	  "t.json:1:141: gpus[1].cuda_rank: 2 is out of range: 2 GPU(s) have a cuda_rank, so "
	  "the ranks are 0 to 1, each once" },
	{ HEAD G1 ", \"cuda_rank\": 1}, " G2 "}]}",
	  "t.json:1:74: gpus[0].cuda_rank: 1 is out of range: 1 GPU(s) have a cuda_rank, so "
	  "the ranks are 0 to 0, each once" },
	/* processes */
	{ HEAD G1 ", \"processes\": {}}]}",
	  "t.json:1:74: gpus[0].processes: expected an array, got an object" },
	{ HEAD G1 ", \"processes\": [{\"used_mib\": 5}]}]}",
	  "t.json:1:75: gpus[0].processes[0]: missing required key 'pid'" },
	{ HEAD G1 ", \"processes\": [{\"pid\": 0}]}]}",
	  "t.json:1:83: gpus[0].processes[0].pid: expected a positive integer, got 0" },
	{ HEAD G1 ", \"processes\": [{\"pid\": 4294967296}]}]}",
	  "t.json:1:83: gpus[0].processes[0].pid: expected a positive integer no larger than "
	  "4294967295, got 4294967296" },
	{ HEAD G1 ", \"processes\": [{\"pid\": 1, \"nmae\": \"x\"}]}]}",
	  "t.json:1:86: gpus[0].processes[0]: unknown key 'nmae' (did you mean 'name'?)" },
	/* MIG */
	{ HEAD G1 ", \"mig\": [{\"uuid\": \"MIG-1\", \"ci\": 0}]}]}",
	  "t.json:1:69: gpus[0].mig[0]: missing required key 'gi'" },
	{ HEAD G1 ", \"mig\": [{\"uuid\": \"MIG-1\", \"gi\": 1, \"ci\": 0}, "
		  "{\"uuid\": \"MIG-2\", \"gi\": 1, \"ci\": 0}]}]}",
	  "t.json:1:106: gpus[0].mig[1]: gi 1 ci 0 is already mig[0]" },
	{ HEAD G1 ", \"mig_mode\": false, "
		  "\"mig\": [{\"uuid\": \"MIG-1\", \"gi\": 1, \"ci\": 0}]}]}",
	  "t.json:1:61: gpus[0]: mig_mode is false, but the GPU has MIG instances" },
	{ HEAD G1 ", \"mig\": [{\"uuid\": \"MIG-1\", \"gi\": 1, \"ci\": 0, "
		  "\"memory_total_mib\": 10, \"memory_used_mib\": 11}]}]}",
	  "t.json:1:148: gpus[0].mig[0].memory_used_mib: 11 is more than memory_total_mib, 10" },
	{ HEAD G1 ", \"mig\": [{\"uuid\": \"MIG-1\", \"gi\": 1, \"ci\": 0}]},\n" G2 ", \"mig\": "
		  "[{\"uuid\": \"MIG-1\", \"gi\": 1, \"ci\": 0}]}]}",
	  "t.json:2:68: gpus[1].mig[0].uuid: 'MIG-1' is already the UUID of gpus[0].mig[0]" },
	/* links */
	{ "{\"gpus\": [], \"links\": [{\"a\": 0, \"b\": 1, \"level\": \"sys\"}]}",
	  "t.json:1:30: links[0].a: there is no GPU 0: the fixture has 0" },
	{ "{\"links\": 5, \"gpus\": []}", "t.json:1:11: links: expected an array, got an integer" },
	{ HEAD G1 "}, " G2 "}], \"links\": [{\"a\": 1, \"b\": 1, \"level\": \"sys\"}]}",
	  "t.json:1:133: links[0]: a link joins two GPUs, not GPU 1 with itself" },
	{ HEAD G1
	  "}, " G2 "}], \"links\": "
	  "[{\"a\": 0, \"b\": 1, \"level\": \"sys\"}, {\"b\": 0, \"a\": 1, \"level\": \"pix\"}]}",
	  "t.json:1:158: links[1]: GPUs 0 and 1 are already linked by links[0]" },
	{ HEAD G1 "}, " G2 "}], \"links\": [{\"a\": 0, \"b\": 1}]}",
	  "t.json:1:124: links[0]: missing required key 'level'" },
	{ HEAD G1 "}, " G2 "}], \"links\": [{\"a\": 0, \"b\": 1, \"level\": 3}]}",
	  "t.json:1:150: links[0].level: expected a link level (nvlink, pix, pxb, phb, node or "
	  "sys), got an integer" },
	{ HEAD G1 "}, " G2 "}], \"links\": [{\"a\": 0, \"b\": 1, \"lvl\": \"sys\"}]}",
	  "t.json:1:141: links[0]: unknown key 'lvl' (did you mean 'level'?)" },
};

/* Runs every case and names each that fails before failing the test. */
static void test_bad_texts(void **state)
{
	size_t failed = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad_texts); i++) {
		struct vd_system *sys = (struct vd_system *)1;
		int err;

		err = fixture_parse(&sys, bad_texts[i].text, strlen(bad_texts[i].text), "t.json");
		if (err == VD_EPARSE && !sys && !strcmp(vd_error_last(), bad_texts[i].message))
			continue;
		print_error("case %zu: %s\n  got %s: %s\n  want EPARSE: %s\n", i, bad_texts[i].text,
			    vd_error_name(err), vd_error_last(), bad_texts[i].message);
		vd_system_free(sys == (struct vd_system *)1 ? NULL : sys);
		failed++;
	}
	assert_int_equal(failed, 0);
}

/* The files of tests/fixtures/bad, documented in its README. */
static const struct bad_case bad_files[] = {
	{ "tests/fixtures/bad/syntax.json",
	  "tests/fixtures/bad/syntax.json:6:41: string or '}' expected near '}'" },
	{ "tests/fixtures/bad/type.json",
	  "tests/fixtures/bad/type.json:6:61: gpus[1].memory_total_mib: expected a non-negative "
	  "integer, got a string" },
	{ "tests/fixtures/bad/missing-uuid.json",
	  "tests/fixtures/bad/missing-uuid.json:5:5: gpus[1]: missing required key 'uuid'" },
	{ "tests/fixtures/bad/duplicate-uuid.json",
	  "tests/fixtures/bad/duplicate-uuid.json:7:15: gpus[2].uuid: "
	  "'GPU-11111111-2222-3333-4444-555555555555' is already the UUID of gpus[0]" },
	{ "tests/fixtures/bad/unknown-key.json",
	  "tests/fixtures/bad/unknown-key.json:7:7: gpus[0]: unknown key 'memory_totl_mib' (did "
	  "you mean 'memory_total_mib'?)" },
	{ "tests/fixtures/bad/used-over-total.json",
	  "tests/fixtures/bad/used-over-total.json:8:26: gpus[0].memory_used_mib: 23035 is more "
	  "than memory_total_mib, 23034" },
	{ "tests/fixtures/bad/link-level.json",
	  "tests/fixtures/bad/link-level.json:8:41: links[0].level: expected a link level (nvlink, "
	  "pix, pxb, phb, node or sys), got 'pcie'" },
	{ "tests/fixtures/bad/rank.json",
	  "tests/fixtures/bad/rank.json:10:54: gpus[3].cuda_rank: 2 is already the cuda_rank of "
	  "gpus[1]" },
	{ "tests/fixtures/bad/empty.json",
	  "tests/fixtures/bad/empty.json:1:1: empty fixture: expected a JSON object with a 'gpus' "
	  "array" },
	{ "tests/fixtures/bad/top-level.json",
	  "tests/fixtures/bad/top-level.json:1:1: expected a JSON object with a 'gpus' array, got "
	  "an array" },
	{ "tests/fixtures/bad/mig-uuid.json",
	  "tests/fixtures/bad/mig-uuid.json:7:19: gpus[0].mig[1].uuid: expected a UUID that starts "
	  "with 'MIG-', got 'GPU-aaaaaaaa-bbbb-cccc-dddd-ffffffffffff'" },
};

/* Keys a later format may add are passed over; the known ones around them still count. */
static void test_new_keys_passed_over(void **state)
{
	static const char text[] =
		"{\"hostname\": \"node7\", \"gpus\": [{\"uuid\": \"GPU-1\", \"name\": \"n\", "
		"\"pci_bus_id\": \"b\", \"ecc_errors\": 0, \"memory_total_mib\": 100, "
		"\"memory_used_mib\": 40, "
		"\"processes\": [{\"pid\": 1, \"container\": \"c1\"}]}]}";
	struct vd_system *sys = NULL;

	(void)state;
	assert_int_equal(fixture_parse(&sys, text, strlen(text), "t.json"), 0);
	assert_int_equal(sys->ngpus, 1);
	assert_int_equal(sys->gpus[0].memory_total_mib, 100);
	assert_int_equal(sys->gpus[0].nprocesses, 1);
	assert_int_equal(sys->gpus[0].processes[0].pid, 1);
	vd_system_free(sys);
}

static void test_bad_files(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad_files); i++) {
		struct vd_system *sys = (struct vd_system *)1;
		struct vd_backend *b = (struct vd_backend *)1;
		struct vd_backend_options opts = { .fixture = bad_files[i].text };

		assert_int_equal(fixture_load(&sys, bad_files[i].text), VD_EPARSE);
		assert_null(sys);
		assert_string_equal(vd_error_last(), bad_files[i].message);
		/* The backend passes the same code and message on. */
		assert_int_equal(vd_backend_open(&b, &opts), VD_EPARSE);
		assert_null(b);
		assert_string_equal(vd_error_last(), bad_files[i].message);
	}
}

/* Every file in tests/fixtures/bad/ has its row above, so none goes untested. */
static void test_bad_files_all_listed(void **state)
{
	glob_t g;

	(void)state;
	assert_int_equal(glob("tests/fixtures/bad/*.json", 0, NULL, &g), 0);
	assert_int_equal(g.gl_pathc, ARRAY_SIZE(bad_files));
	for (size_t i = 0; i < g.gl_pathc; i++) {
		size_t j = 0;

		while (j < ARRAY_SIZE(bad_files) && strcmp(bad_files[j].text, g.gl_pathv[i]))
			j++;
		if (j == ARRAY_SIZE(bad_files))
			fail_msg("%s has no row in bad_files", g.gl_pathv[i]);
	}
	globfree(&g);
}

static void test_too_many_gpus(void **state)
{
	const char *gpu = "{\"uuid\": \"GPU-1\", \"name\": \"n\", \"pci_bus_id\": \"b\"}";
	size_t n = 1025, len = strlen(gpu) + 2;
	char *text = malloc(16 + n * len);
	struct vd_system *sys;
	size_t used;

	(void)state;
	assert_non_null(text);
	used = (size_t)sprintf(text, "{\"gpus\": [");
	for (size_t i = 0; i < n; i++)
		used += (size_t)sprintf(text + used, "%s%s", i ? ", " : "", gpu);
	used += (size_t)sprintf(text + used, "]}");
	assert_int_equal(fixture_parse(&sys, text, used, "big.json"), VD_EPARSE);
	assert_string_equal(vd_error_last(), "big.json:1:10: gpus: 1025 entries, at most 1024");
	free(text);
}

/* Input is (pointer, length): no terminator is read, embedded NULs are errors. */
static void test_unterminated_and_nul(void **state)
{
	static const char doc[] = "{\"gpus\": []}";
	const char nul[] = "{\"gpus\": []\0}";
	struct vd_system *sys;
	char *exact;

	(void)state;
	exact = malloc(sizeof(doc) - 1);
	assert_non_null(exact);
	memcpy(exact, doc, sizeof(doc) - 1);
	assert_int_equal(fixture_parse(&sys, exact, sizeof(doc) - 1, "t.json"), 0);
	assert_int_equal(sys->ngpus, 0);
	vd_system_free(sys);
	/* Cut short, the same bytes are a syntax error. */
	assert_int_equal(fixture_parse(&sys, exact, sizeof(doc) - 2, "t.json"), VD_EPARSE);
	assert_null(sys);
	assert_non_null(strstr(vd_error_last(), "t.json:1:"));
	free(exact);
	assert_int_equal(fixture_parse(&sys, nul, sizeof(nul) - 1, "t.json"), VD_EPARSE);
	assert_null(sys);
	/* A message is one line, whatever the input holds. */
	assert_null(strchr(vd_error_last(), '\n'));
	assert_int_equal(fixture_parse(&sys, "{", 1, "a\nb.json"), VD_EPARSE);
	assert_null(strchr(vd_error_last(), '\n'));
}

static void test_file_errors(void **state)
{
	struct vd_system *sys = (struct vd_system *)1;

	(void)state;
	assert_int_equal(fixture_load(&sys, "tests/fixtures/no-such.json"), VD_ENOTFOUND);
	assert_null(sys);
	assert_string_equal(vd_error_last(),
			    "cannot read fixture 'tests/fixtures/no-such.json': No such file or "
			    "directory");
	assert_int_equal(fixture_load(&sys, "tests/fixtures"), VD_EIO);
	assert_null(sys);
	assert_string_equal(vd_error_last(),
			    "cannot read fixture 'tests/fixtures': Is a directory");
}

/* ---- Well-formed fixtures ------------------------------------------------ */

static struct vd_system *load(const char *path)
{
	struct vd_system *sys = NULL;
	int err = fixture_load(&sys, path);

	if (err)
		fail_msg("%s: %s", path, vd_error_last());
	return sys;
}

static void test_eight(void **state)
{
	struct vd_system *sys = load("tests/fixtures/eight.json");

	(void)state;
	assert_int_equal(sys->ngpus, 8);
	assert_string_equal(sys->driver_version, "550.54.15");
	assert_int_equal(sys->cuda_driver_version, 12040);
	assert_true(vd_system_fastest_known(sys));
	for (size_t i = 0; i < 8; i++) {
		const struct vd_gpu *g = &sys->gpus[i];

		assert_int_equal(g->index, i);
		assert_int_equal(g->cuda_rank, i);
		assert_string_equal(g->name, "NVIDIA H100 80GB HBM3");
		assert_int_equal(g->memory_total_mib, 81559);
		assert_int_equal(vd_gpu_memory_free_mib(g), 81559);
		assert_int_equal(g->power_mw, 70000);
		assert_int_equal(g->fields, VD_GPU_MEMORY | VD_GPU_UTILIZATION |
						    VD_GPU_TEMPERATURE | VD_GPU_POWER |
						    VD_GPU_NUMA | VD_GPU_CUDA_RANK |
						    VD_GPU_PROCESSES);
		assert_int_equal(g->nprocesses, 0);
		assert_false(g->mig_mode);
		assert_false(g->lost);
		for (size_t j = 0; j < i; j++)
			assert_string_not_equal(g->uuid, sys->gpus[j].uuid);
	}
	/* NVLink all to all: each pair once, a < b. */
	assert_int_equal(sys->nlinks, 28);
	for (size_t i = 0; i < sys->nlinks; i++) {
		assert_true(sys->links[i].a < sys->links[i].b);
		assert_int_equal(sys->links[i].level, VD_LINK_NVLINK);
	}
	vd_system_free(sys);
}

static void test_mixed(void **state)
{
	struct vd_system *sys = load("tests/fixtures/mixed.json");
	const struct vd_gpu *g;

	(void)state;
	assert_int_equal(sys->ngpus, 4);
	assert_string_equal(sys->driver_version, "535.161.08");
	assert_int_equal(sys->cuda_driver_version, -1); /* absent: unknown */
	assert_int_equal(sys->nlinks, 0);
	assert_null(sys->links);
	assert_true(vd_system_fastest_known(sys));
	/* Fastest first differs from PCI order. */
	assert_int_equal(sys->gpus[0].cuda_rank, 3);
	assert_int_equal(sys->gpus[1].cuda_rank, 1);
	assert_int_equal(sys->gpus[2].cuda_rank, 0);
	assert_int_equal(sys->gpus[3].cuda_rank, 2);

	g = &sys->gpus[0]; /* no utilization, no power */
	assert_string_equal(g->name, "Tesla T4");
	assert_int_equal(g->fields, VD_GPU_MEMORY | VD_GPU_TEMPERATURE | VD_GPU_NUMA |
					    VD_GPU_CUDA_RANK | VD_GPU_PROCESSES);
	assert_int_equal(g->temperature_c, 36);

	g = &sys->gpus[1]; /* no temperature, no NUMA node; a process of unknown use */
	assert_int_equal(g->fields, VD_GPU_MEMORY | VD_GPU_UTILIZATION | VD_GPU_POWER |
					    VD_GPU_CUDA_RANK | VD_GPU_PROCESSES);
	assert_int_equal(g->power_mw, 231750);
	assert_int_equal(vd_gpu_memory_free_mib(g), 46068 - 20481);
	assert_int_equal(g->nprocesses, 2);
	assert_int_equal(g->processes[0].pid, 7311);
	assert_true(g->processes[0].used_known);
	assert_int_equal(g->processes[0].used_mib, 20100);
	assert_string_equal(g->processes[0].name, "python");
	assert_string_equal(g->processes[0].user, "alice");
	assert_int_equal(g->processes[1].pid, 7402);
	assert_false(g->processes[1].used_known);
	assert_string_equal(g->processes[1].name, "");
	assert_string_equal(g->processes[1].user, "");

	g = &sys->gpus[2]; /* no memory */
	assert_false(g->fields & VD_GPU_MEMORY);
	assert_int_equal(vd_gpu_memory_free_mib(g), -1);
	assert_int_equal(g->power_mw, 22000);

	g = &sys->gpus[3]; /* processes unknown, memory full */
	assert_false(g->fields & VD_GPU_PROCESSES);
	assert_null(g->processes);
	assert_int_equal(vd_gpu_memory_free_mib(g), 0);
	assert_int_equal(g->utilization_gpu, 100);
	vd_system_free(sys);
}

static void test_mig(void **state)
{
	struct vd_system *sys = load("tests/fixtures/mig.json");
	const struct vd_gpu *g = &sys->gpus[0];

	(void)state;
	assert_int_equal(sys->ngpus, 2);
	assert_true(g->mig_mode); /* implied by its instances */
	assert_int_equal(g->nmig, 3);
	assert_string_equal(g->mig[0].uuid, "MIG-0c3f6a91-2e57-5b8d-a14c-7f92e3d0b516");
	assert_int_equal(g->mig[0].gi, 1);
	assert_int_equal(g->mig[0].ci, 0);
	assert_string_equal(g->mig[0].profile, "3g.20gb");
	assert_int_equal(g->mig[0].fields, VD_GPU_MEMORY);
	assert_int_equal(g->mig[0].memory_total_mib, 20096);
	assert_int_equal(g->mig[0].memory_used_mib, 7210);
	assert_int_equal(g->mig[1].gi, 5);
	assert_int_equal(g->mig[2].gi, 13);
	assert_string_equal(g->mig[2].profile, "1g.5gb");
	assert_int_equal(g->mig[2].fields, 0); /* memory unknown */
	assert_false(sys->gpus[1].mig_mode);
	assert_int_equal(sys->gpus[1].nmig, 0);
	assert_null(sys->gpus[1].mig);
	/* Written 1-0, stored 0-1. */
	assert_int_equal(sys->nlinks, 1);
	assert_int_equal(sys->links[0].a, 0);
	assert_int_equal(sys->links[0].b, 1);
	vd_system_free(sys);
}

static void test_mig_mode_without_instances(void **state)
{
	static const char doc[] = "{\"gpus\": [{\"uuid\": \"GPU-1\", \"name\": \"n\", "
				  "\"pci_bus_id\": \"b\", \"mig_mode\": true, \"mig\": []}]}";
	struct vd_system *sys;

	(void)state;
	assert_int_equal(fixture_parse(&sys, doc, strlen(doc), "t.json"), 0);
	assert_true(sys->gpus[0].mig_mode);
	assert_int_equal(sys->gpus[0].nmig, 0);
	assert_int_equal(sys->gpus[0].fields, 0);
	vd_system_free(sys);
}

static void test_lost(void **state)
{
	struct vd_system *sys = load("tests/fixtures/lost.json");

	(void)state;
	assert_int_equal(sys->ngpus, 3);
	assert_false(sys->gpus[0].lost);
	assert_true(sys->gpus[1].lost);
	assert_int_equal(sys->gpus[1].fields, 0); /* nothing known of it */
	assert_false(sys->gpus[2].lost);
	assert_int_equal(sys->gpus[2].power_mw, 281500);
	assert_false(vd_system_fastest_known(sys));
	vd_system_free(sys);
}

static void test_none(void **state)
{
	struct vd_system *sys = load("tests/fixtures/none.json");

	(void)state;
	assert_int_equal(sys->ngpus, 0);
	assert_null(sys->gpus);
	assert_int_equal(sys->nlinks, 0);
	vd_system_free(sys);
}

/* Every fixture in the tree, whoever wrote it, is well-formed. */
static void test_all_fixtures_parse(void **state)
{
	glob_t g;

	(void)state;
	assert_int_equal(glob("tests/fixtures/*.json", 0, NULL, &g), 0);
	assert_true(g.gl_pathc >= 5);
	for (size_t i = 0; i < g.gl_pathc; i++)
		vd_system_free(load(g.gl_pathv[i]));
	globfree(&g);
}

static void test_demo(void **state)
{
	struct vd_system *sys = NULL;
	static const char *const names[] = {
		"Tesla V100-SXM2-32GB",
		"Tesla P100-PCIE-16GB",
		"NVIDIA GeForce RTX 3090",
		"NVIDIA GeForce RTX 2080 Ti",
	};
	static const unsigned ranks[] = { 1, 3, 0, 2 };
	static const uint64_t totals[] = { 32768, 16384, 24576, 11264 };
	static const int numa[] = { 0, 0, 1, 1 };

	(void)state;
	assert_int_equal(fixture_parse(&sys, demo_json, strlen(demo_json), "demo"), 0);
	assert_int_equal(sys->ngpus, 4);
	assert_string_equal(sys->driver_version, "535.183.01");
	assert_int_equal(sys->cuda_driver_version, 12020);
	assert_true(vd_system_fastest_known(sys));
	for (size_t i = 0; i < 4; i++) {
		const struct vd_gpu *g = &sys->gpus[i];

		assert_string_equal(g->name, names[i]);
		assert_int_equal(g->cuda_rank, ranks[i]);
		assert_int_equal(g->memory_total_mib, totals[i]);
		assert_int_equal(g->numa_node, numa[i]);
		assert_true(g->fields & VD_GPU_PROCESSES);
		assert_int_equal(strncmp(g->uuid, "GPU-", 4), 0);
		assert_int_equal(strlen(g->uuid), 40);
		for (size_t j = 0; j < i; j++) {
			assert_true(strcmp(g->pci_bus_id, sys->gpus[j].pci_bus_id) > 0);
			assert_int_not_equal(strncmp(g->uuid, sys->gpus[j].uuid, 12), 0);
		}
	}
	/* The V100 is busy, the P100 free. */
	assert_true(sys->gpus[0].nprocesses > 0);
	assert_true(sys->gpus[0].utilization_gpu > 90);
	assert_int_equal(sys->gpus[1].nprocesses, 0);
	assert_true(vd_gpu_memory_free_mib(&sys->gpus[1]) > 16000);
	assert_int_equal(sys->nlinks, 6);
	vd_system_free(sys);
}

/* ---- Backends ------------------------------------------------------------ */

static void test_backend_demo(void **state)
{
	struct vd_backend_options opts = { .demo = 1 };
	struct vd_backend *b = NULL;
	struct vd_system *sys = NULL;

	(void)state;
	assert_int_equal(vd_backend_open(&b, &opts), 0);
	assert_string_equal(vd_backend_name(b), "demo");
	assert_string_equal(vd_backend_source(b), "(built in)");
	assert_int_equal(vd_backend_snapshot(&sys, b), 0);
	assert_int_equal(sys->ngpus, 4);
	assert_string_equal(sys->gpus[2].name, "NVIDIA GeForce RTX 3090");
	vd_system_free(sys);
	vd_backend_free(b);
}

static void test_backend_fixture(void **state)
{
	struct vd_backend_options opts = { .fixture = "tests/fixtures/mig.json" };
	struct vd_backend *b = NULL;
	struct vd_system *sys = NULL;

	(void)state;
	assert_int_equal(vd_backend_open(&b, &opts), 0);
	assert_string_equal(vd_backend_name(b), "fixture");
	assert_string_equal(vd_backend_source(b), "tests/fixtures/mig.json");
	assert_int_equal(vd_backend_snapshot(&sys, b), 0);
	assert_int_equal(sys->ngpus, 2);
	assert_int_equal(sys->gpus[0].nmig, 3);
	vd_system_free(sys);
	vd_backend_free(b);

	opts.fixture = "tests/fixtures/no-such.json";
	b = (struct vd_backend *)1;
	assert_int_equal(vd_backend_open(&b, &opts), VD_ENOTFOUND);
	assert_null(b);
	assert_string_equal(vd_error_last(),
			    "cannot read fixture 'tests/fixtures/no-such.json': No such file or "
			    "directory");
}

static void test_backend_env(void **state)
{
	struct vd_backend_options opts = { .use_env = 1 };
	struct vd_backend *b = NULL;
	struct vd_system *sys = NULL;

	(void)state;
	assert_int_equal(setenv("VISDEV_FIXTURE", "tests/fixtures/mixed.json", 1), 0);
	assert_int_equal(vd_backend_open(&b, &opts), 0);
	assert_string_equal(vd_backend_name(b), "fixture");
	assert_string_equal(vd_backend_source(b), "tests/fixtures/mixed.json");
	assert_int_equal(vd_backend_snapshot(&sys, b), 0);
	assert_string_equal(sys->gpus[0].name, "Tesla T4");
	vd_system_free(sys);
	vd_backend_free(b);

	/* An explicit choice wins over the environment. */
	opts.demo = 1;
	assert_int_equal(vd_backend_open(&b, &opts), 0);
	assert_string_equal(vd_backend_name(b), "demo");
	vd_backend_free(b);
	opts.demo = 0;
	opts.fixture = "tests/fixtures/eight.json";
	assert_int_equal(vd_backend_open(&b, &opts), 0);
	assert_string_equal(vd_backend_source(b), "tests/fixtures/eight.json");
	vd_backend_free(b);

	/* A malformed fixture named by the environment fails the same way. */
	opts.fixture = NULL;
	assert_int_equal(setenv("VISDEV_FIXTURE", "tests/fixtures/bad/type.json", 1), 0);
	assert_int_equal(vd_backend_open(&b, &opts), VD_EPARSE);
	assert_null(b);
	assert_non_null(strstr(vd_error_last(), "tests/fixtures/bad/type.json:6:61: "));
	unsetenv("VISDEV_FIXTURE");
}

static void test_backend_demo_and_fixture(void **state)
{
	struct vd_backend_options opts = { .demo = 1, .fixture = "tests/fixtures/eight.json" };
	struct vd_backend *b = (struct vd_backend *)1;

	(void)state;
	assert_int_equal(vd_backend_open(&b, &opts), VD_EINVAL);
	assert_null(b);
}

/* Snapshots are deep copies: changing or freeing one touches no other. */
static void test_snapshot_deep_copy(void **state)
{
	struct vd_backend_options opts = { .fixture = "tests/fixtures/mig.json" };
	struct vd_backend *b = NULL;
	struct vd_system *one = NULL, *two = NULL, *three = NULL;

	(void)state;
	assert_int_equal(vd_backend_open(&b, &opts), 0);
	assert_int_equal(vd_backend_snapshot(&one, b), 0);
	assert_int_equal(vd_backend_snapshot(&two, b), 0);
	assert_ptr_not_equal(one, two);
	assert_ptr_not_equal(one->gpus, two->gpus);
	assert_ptr_not_equal(one->gpus[0].processes, two->gpus[0].processes);
	assert_ptr_not_equal(one->gpus[0].mig, two->gpus[0].mig);
	assert_ptr_not_equal(one->links, two->links);
	assert_memory_equal(one->gpus[0].mig, two->gpus[0].mig, 3 * sizeof(struct vd_mig));

	one->gpus[0].processes[0].pid = 1;
	one->gpus[0].mig[0].gi = 99;
	one->links[0].level = VD_LINK_SYS;
	strcpy(one->gpus[0].name, "changed");
	vd_system_free(one);

	assert_int_equal(vd_backend_snapshot(&three, b), 0);
	vd_backend_free(b); /* snapshots outlive their backend */
	assert_int_equal(two->gpus[0].processes[0].pid, 9120);
	assert_int_equal(three->gpus[0].processes[0].pid, 9120);
	assert_int_equal(three->gpus[0].mig[0].gi, 1);
	assert_int_equal(three->links[0].level, VD_LINK_NVLINK);
	assert_string_equal(three->gpus[0].name, "NVIDIA A100-SXM4-40GB");
	assert_int_equal(three->gpus[0].nmig, 3);
	assert_int_equal(three->nlinks, 1);
	vd_system_free(two);
	vd_system_free(three);
}

static void test_system_copy_empty(void **state)
{
	struct vd_system *src = load("tests/fixtures/none.json"), *copy = NULL;

	(void)state;
	assert_int_equal(system_copy(&copy, src), 0);
	assert_int_equal(copy->ngpus, 0);
	assert_null(copy->gpus);
	assert_null(copy->links);
	assert_string_equal(copy->driver_version, "550.54.15");
	vd_system_free(copy);
	vd_system_free(src);
}

int main(void)
{
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_texts),
		cmocka_unit_test(test_new_keys_passed_over),
		cmocka_unit_test(test_bad_files),
		cmocka_unit_test(test_bad_files_all_listed),
		cmocka_unit_test(test_too_many_gpus),
		cmocka_unit_test(test_unterminated_and_nul),
		cmocka_unit_test(test_file_errors),
		cmocka_unit_test(test_eight),
		cmocka_unit_test(test_mixed),
		cmocka_unit_test(test_mig),
		cmocka_unit_test(test_mig_mode_without_instances),
		cmocka_unit_test(test_lost),
		cmocka_unit_test(test_none),
		cmocka_unit_test(test_all_fixtures_parse),
		cmocka_unit_test(test_demo),
		cmocka_unit_test(test_backend_demo),
		cmocka_unit_test(test_backend_fixture),
		cmocka_unit_test(test_backend_env),
		cmocka_unit_test(test_backend_demo_and_fixture),
		cmocka_unit_test(test_snapshot_deep_copy),
		cmocka_unit_test(test_system_copy_empty),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
