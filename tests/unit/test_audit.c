/*
 * test_audit.c - the lease audit: squatters, memory nothing explains, and
 * idle leases over several looks, judged from a snapshot, leases and what
 * /proc says (written here by hand); the memory's text; /proc read for real.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* GPU 0: alice's job (pid 100, group 100) and its worker 101 (another group, child of 100),
 * bob's 200 and a process /proc does not show (300); 30 GiB used, 20 listed.
 * GPU 1: nothing on it, idle. GPU 2: at work, nothing listed. GPU 3: no process list. */
static const char machine[] =
	"{\"gpus\": ["
	"{\"uuid\": \"GPU-0\", \"name\": \"A\", \"pci_bus_id\": \"0\", \"memory_total_mib\": 81920,"
	" \"memory_used_mib\": 30720, \"utilization_gpu\": 90, \"processes\": ["
	"  {\"pid\": 100, \"used_mib\": 10240}, {\"pid\": 101, \"used_mib\": 4096},"
	"  {\"pid\": 200, \"used_mib\": 2048}, {\"pid\": 300, \"used_mib\": 4096}]},"
	"{\"uuid\": \"GPU-1\", \"name\": \"A\", \"pci_bus_id\": \"1\", \"memory_total_mib\": 81920,"
	" \"memory_used_mib\": 0, \"utilization_gpu\": 0, \"processes\": []},"
	"{\"uuid\": \"GPU-2\", \"name\": \"A\", \"pci_bus_id\": \"2\", \"memory_total_mib\": 81920,"
	" \"memory_used_mib\": 0, \"utilization_gpu\": 40, \"processes\": []},"
	"{\"uuid\": \"GPU-3\", \"name\": \"A\", \"pci_bus_id\": \"3\"}"
	"]}";

static struct vd_system *snapshot(void)
{
	struct vd_system *sys = NULL;

	assert_int_equal(fixture_parse(&sys, machine, strlen(machine), "machine"), 0);
	return sys;
}

static struct vd_lease_holder holder(const char *uuid, uint32_t uid, int32_t pid, int32_t pgid)
{
	struct vd_lease_holder h = {
		.mode = VD_LEASE_EXCLUSIVE, .uid = uid, .pid = pid, .pgid = pgid, .since = 1000
	};

	str_copy(h.uuid, uuid, sizeof(h.uuid));
	snprintf(h.user, sizeof(h.user), "uid %u", (unsigned)uid);
	snprintf(h.command, sizeof(h.command), "job of %d", (int)pid);
	return h;
}

static struct vd_proc proc(int32_t pid, int32_t ppid, int32_t pgid, uint32_t uid, const char *name)
{
	struct vd_proc p = { .pid = pid, .ppid = ppid, .pgid = pgid, .uid = uid };

	str_copy(p.name, name, sizeof(p.name));
	snprintf(p.command, sizeof(p.command), "%s --run", name);
	return p;
}

/* What /proc shows: 100 (alice's job), 101 its worker in a group of its own, 200 bob's. */
static struct vd_proc shown[] = {
	{ .pid = 1 },
	{ .pid = 100, .ppid = 1, .pgid = 100, .uid = 1000, .name = "python3" },
	{ .pid = 101, .ppid = 100, .pgid = 101, .uid = 1000, .name = "python3" },
	{ .pid = 200,
	  .ppid = 1,
	  .pgid = 200,
	  .uid = 1001,
	  .name = "python3",
	  .command = "python3 steal.py" },
};

/* A squatter is a process /proc shows outside every job leasing its GPU; with its memory. */
static void test_squatter(void **state)
{
	struct vd_system *sys = snapshot();
	struct vd_lease_holder hs[] = { holder("GPU-0", 1000, 100, 100) };
	struct vd_leases leases = { hs, 1 };
	struct vd_procs procs = { shown, sizeof(shown) / sizeof(shown[0]) };
	struct vd_audit *a = NULL;

	(void)state;
	assert_int_equal(vd_audit(&a, sys, &leases, &procs, NULL, 5000, 60), 0);
	assert_int_equal(a->nleases, 1);
	assert_int_equal(a->leases[0].use, VD_USE_ACTIVE);
	assert_int_equal(a->leases[0].nsquatters, 1);
	/* 30 GiB used, 20 GiB listed: 10 GiB nobody explains */
	assert_int_equal(a->leases[0].unexplained_mib, 10240);
	assert_int_equal(a->n, 2);
	assert_int_equal(a->findings[0].kind, VD_AUDIT_SQUATTER);
	assert_int_equal(a->findings[0].pid, 200);
	assert_int_equal(a->findings[0].uid, 1001);
	assert_int_equal(a->findings[0].mib, 2048);
	assert_string_equal(a->findings[0].command, "python3 steal.py");
	assert_string_equal(a->findings[0].uuid, "GPU-0");
	assert_int_equal(a->findings[0].lease, 0);
	assert_int_equal(a->findings[1].kind, VD_AUDIT_UNEXPLAINED);
	assert_int_equal(a->findings[1].mib, 10240);
	vd_audit_free(a);

	/* bob leases a share of it too: his process is his job's, no squatter is left */
	{
		struct vd_lease_holder two[] = { holder("GPU-0", 1000, 100, 100),
						 holder("GPU-0", 1001, 200, 200) };
		struct vd_leases both = { two, 2 };

		two[1].mode = VD_LEASE_SHARED;
		assert_int_equal(vd_audit(&a, sys, &both, &procs, NULL, 5000, 60), 0);
		assert_int_equal(a->leases[0].nsquatters, 0);
		assert_int_equal(a->leases[1].nsquatters, 0);
		assert_int_equal(a->n, 1);
		assert_int_equal(a->findings[0].kind, VD_AUDIT_UNEXPLAINED);
		vd_audit_free(a);
	}
	/* a hold of the line is no lease: nothing on GPU 0 is judged then */
	hs[0].mode = VD_LEASE_HELD;
	assert_int_equal(vd_audit(&a, sys, &leases, &procs, NULL, 5000, 60), 0);
	assert_int_equal(a->n, 0);
	assert_int_equal(a->leases[0].use, VD_USE_UNKNOWN);
	vd_audit_free(a);
	vd_system_free(sys);
}

/* Part of a job: its group, its descendants however deep, or its user's visdev. */
static void test_membership(void **state)
{
	struct vd_system *sys = snapshot();
	struct vd_lease_holder hs[] = { holder("GPU-0", 1000, 100, 100) };
	struct vd_leases leases = { hs, 1 };
	struct vd_proc deep[] = {
		proc(1, 0, 1, 0, "init"),
		proc(100, 1, 100, 1000, "bash"),
		proc(101, 150, 101, 1000, "python"),
		proc(150, 100, 150, 1000, "torchrun"),
		proc(200, 1, 200, 1000, "visdev"),
	};
	struct vd_procs procs = { deep, sizeof(deep) / sizeof(deep[0]) };
	struct vd_audit *a = NULL;

	(void)state;
	assert_int_equal(vd_audit(&a, sys, &leases, &procs, NULL, 5000, 60), 0);
	assert_int_equal(a->leases[0].nsquatters, 0);
	vd_audit_free(a);
	/* the same visdev of another user is a squatter; so is a grandchild cut from the job */
	deep[4].uid = 1001;
	deep[3].ppid = 1;
	assert_int_equal(vd_audit(&a, sys, &leases, &procs, NULL, 5000, 60), 0);
	assert_int_equal(a->leases[0].nsquatters, 2);
	assert_int_equal(a->findings[0].pid, 101);
	assert_int_equal(a->findings[1].pid, 200);
	vd_audit_free(a);
	/* in the job's process group, whatever its parent */
	deep[2].pgid = 100;
	assert_int_equal(vd_audit(&a, sys, &leases, &procs, NULL, 5000, 60), 0);
	assert_int_equal(a->leases[0].nsquatters, 1);
	vd_audit_free(a);
	vd_system_free(sys);
}

/*
 * A record is its holder's word: pid 1 in it hides nothing, nor does a group
 * or parent shared with another user's process; a process whose memory is
 * unknown could explain it all; one /proc does not show leaves the use unknown.
 */
static void test_forged_and_unknown(void **state)
{
	struct vd_system *sys = snapshot();
	struct vd_lease_holder hs[] = { holder("GPU-0", 1000, 1, 1) };
	struct vd_leases leases = { hs, 1 };
	struct vd_procs procs = { shown, sizeof(shown) / sizeof(shown[0]) };
	struct vd_audit *a = NULL;

	(void)state;
	assert_int_equal(vd_audit(&a, sys, &leases, &procs, NULL, 5000, 60), 0);
	/* 100 and 101 are alice's but not this job's; 200 is bob's */
	assert_int_equal(a->leases[0].nsquatters, 3);
	vd_audit_free(a);
	/* bob's process in alice's job's group, and under her job: still not hers */
	hs[0] = holder("GPU-0", 1000, 100, 200);
	shown[3].ppid = 100;
	assert_int_equal(vd_audit(&a, sys, &leases, &procs, NULL, 5000, 60), 0);
	assert_int_equal(a->leases[0].nsquatters, 1);
	assert_int_equal(a->findings[0].pid, 200);
	vd_audit_free(a);
	shown[3].ppid = 1;
	/* one process's memory unknown: nothing said of memory nobody explains */
	sys->gpus[0].processes[3].used_known = 0;
	assert_int_equal(vd_audit(&a, sys, &leases, &procs, NULL, 5000, 60), 0);
	assert_int_equal(a->leases[0].unexplained_mib, 0);
	assert_int_equal(a->n, 1);
	vd_audit_free(a);
	/* a lease whose job /proc does not show: its GPU's unseen process may be it */
	hs[0] = holder("GPU-0", 1000, 300, 300);
	hs[0].mode = VD_LEASE_SHARED;
	assert_int_equal(vd_audit(&a, sys, &leases, &procs, NULL, 5000, 60), 0);
	assert_int_equal(a->leases[0].use, VD_USE_UNKNOWN);
	vd_audit_free(a);
	vd_system_free(sys);
}

/* Idle: quiet at every look from the first quiet one, for the threshold; memory carries it. */
static void test_idle(void **state)
{
	struct vd_system *sys = snapshot();
	struct vd_lease_holder hs[] = {
		holder("GPU-1", 1000, 100, 100), /* quiet: nothing on it, no utilisation */
		holder("GPU-2", 1000, 110, 110), /* at work */
		holder("GPU-3", 1000, 120, 120), /* nothing to tell by */
	};
	struct vd_leases leases = { hs, 3 };
	struct vd_procs procs = { shown, sizeof(shown) / sizeof(shown[0]) };
	struct vd_audit_memory *m = NULL;
	struct vd_audit *a = NULL;

	(void)state;
	assert_int_equal(vd_audit_memory_new(&m), 0);
	assert_int_equal(vd_audit(&a, sys, &leases, &procs, m, 5000, 600), 0);
	assert_int_equal(a->leases[0].use, VD_USE_QUIET);
	assert_int_equal(a->leases[0].quiet_s, 0);
	assert_int_equal(a->leases[1].use, VD_USE_ACTIVE);
	assert_int_equal(a->leases[1].quiet_s, -1);
	assert_int_equal(a->leases[2].use, VD_USE_UNKNOWN);
	assert_int_equal(a->n, 0);
	vd_audit_free(a);
	/* 599 s later: still quiet, not yet idle */
	assert_int_equal(vd_audit(&a, sys, &leases, &procs, m, 5599, 600), 0);
	assert_int_equal(a->leases[0].use, VD_USE_QUIET);
	assert_int_equal(a->leases[0].quiet_s, 599);
	assert_int_equal(a->n, 0);
	vd_audit_free(a);
	assert_int_equal(vd_audit(&a, sys, &leases, &procs, m, 5600, 600), 0);
	assert_int_equal(a->leases[0].use, VD_USE_IDLE);
	assert_int_equal(a->n, 1);
	assert_int_equal(a->findings[0].kind, VD_AUDIT_IDLE);
	assert_int_equal(a->findings[0].seconds, 600);
	assert_int_equal(a->findings[0].pid, 100);
	assert_string_equal(a->findings[0].uuid, "GPU-1");
	vd_audit_free(a);
	/* a look that cannot tell (no process list for a moment) ends no streak */
	sys->gpus[1].fields &= ~(unsigned)(VD_GPU_PROCESSES | VD_GPU_UTILIZATION);
	assert_int_equal(vd_audit(&a, sys, &leases, &procs, m, 5700, 600), 0);
	assert_int_equal(a->leases[0].use, VD_USE_UNKNOWN);
	vd_audit_free(a);
	sys->gpus[1].fields |= VD_GPU_PROCESSES | VD_GPU_UTILIZATION;
	assert_int_equal(vd_audit(&a, sys, &leases, &procs, m, 5800, 600), 0);
	assert_int_equal(a->leases[0].quiet_s, 800);
	vd_audit_free(a);
	/* a look that sees the job at work ends the streak; the next quiet one starts again */
	sys->gpus[1].utilization_gpu = 5;
	assert_int_equal(vd_audit(&a, sys, &leases, &procs, m, 6000, 600), 0);
	assert_int_equal(a->leases[0].use, VD_USE_ACTIVE);
	vd_audit_free(a);
	sys->gpus[1].utilization_gpu = 0;
	assert_int_equal(vd_audit(&a, sys, &leases, &procs, m, 7000, 600), 0);
	assert_int_equal(a->leases[0].quiet_s, 0);
	vd_audit_free(a);
	/* another lease on the same device (a new job) is not the old one's streak */
	hs[0].pid = 101;
	assert_int_equal(vd_audit(&a, sys, &leases, &procs, m, 7100, 600), 0);
	assert_int_equal(a->leases[0].quiet_s, 0);
	vd_audit_free(a);
	/* without a memory, nothing is idle */
	assert_int_equal(vd_audit(&a, sys, &leases, &procs, NULL, 99999, 600), 0);
	assert_int_equal(a->leases[0].use, VD_USE_QUIET);
	assert_int_equal(a->leases[0].quiet_s, -1);
	vd_audit_free(a);
	vd_audit_memory_free(m);
	vd_system_free(sys);
}

/* The memory is written whole and read back; what is not one is refused with its line. */
static void test_memory_file(void **state)
{
	struct vd_system *sys = snapshot();
	struct vd_lease_holder hs[] = { holder("GPU-1", 1000, 100, 100) };
	struct vd_leases leases = { hs, 1 };
	struct vd_procs procs = { shown, sizeof(shown) / sizeof(shown[0]) };
	struct vd_audit_memory *m = NULL;
	struct vd_audit *a = NULL;
	char dir[] = "/tmp/test_audit.XXXXXX", path[64], text[256] = "";
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/audit", dir);
	assert_int_equal(vd_audit_memory_load(&m, path), 0); /* none yet: empty */
	assert_int_equal(vd_audit(&a, sys, &leases, &procs, m, 5000, 600), 0);
	vd_audit_free(a);
	assert_int_equal(vd_audit_memory_save(m, path), 0);
	vd_audit_memory_free(m);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_true(fread(text, 1, sizeof(text) - 1, f) > 0);
	fclose(f);
	assert_string_equal(text, "visdev-audit 1\nGPU-1\t100\t1000\t5000\n");
	assert_int_equal(vd_audit_memory_load(&m, path), 0);
	assert_int_equal(vd_audit(&a, sys, &leases, &procs, m, 5700, 600), 0);
	assert_int_equal(a->leases[0].use, VD_USE_IDLE);
	assert_int_equal(a->leases[0].quiet_s, 700);
	vd_audit_free(a);
	vd_audit_memory_free(m);
	unlink(path);
	rmdir(dir);
	vd_system_free(sys);

	{
		static const struct {
			const char *text, *message;
		} bad[] = {
			{ "", "line 1: not what visdev's audit keeps" },
			{ "visdev-audit 2\n", "line 1: not what visdev's audit keeps" },
			{ "visdev-audit 1\nGPU-1\t100\t1000\n",
			  "line 2: not a lease the audit keeps" },
			{ "visdev-audit 1\nGPU-1\t100\t1000\t5000",
			  "line 2: not a lease the audit keeps" },
			{ "visdev-audit 1\nGPU-1\t0\t1000\t5000\n",
			  "line 2: not a lease the audit keeps" },
			{ "visdev-audit 1\nGPU 1\t1\t1000\t5000\n",
			  "line 2: not a lease the audit keeps" },
			{ "visdev-audit 1\nGPU-1\t1\t1000\t5000\n\t1\t1\t1\n",
			  "line 3: not a lease the audit keeps" },
			{ "visdev-audit 1\nGPU-1\t1\t-5\t5000\n",
			  "line 2: not a lease the audit keeps" },
			{ "visdev-audit 1\nGPU-1\t1\t99999999999999999999\t1\n",
			  "line 2: not a lease the audit keeps" },
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			m = NULL;
			assert_int_equal(
				vd_audit_memory_parse(&m, bad[i].text, strlen(bad[i].text)),
				VD_EPARSE);
			assert_null(m);
			assert_string_equal(vd_error_last(), bad[i].message);
		}
	}
}

/* /proc for real: this process and its parents, with what identifies it. */
static void test_procs_read(void **state)
{
	struct vd_system *sys = snapshot();
	struct vd_procs *procs = NULL;
	int self = 0, parent = 0;

	(void)state;
	sys->gpus[1].processes = calloc(2, sizeof(struct vd_process));
	sys->gpus[1].nprocesses = 2;
	sys->gpus[1].processes[0].pid = (uint32_t)getpid();
	sys->gpus[1].processes[1].pid = 0x7ffffff0; /* no such process: left out */
	assert_int_equal(vd_procs_read(&procs, sys), 0);
	for (size_t i = 0; i < procs->n; i++) {
		if (i)
			assert_true(procs->procs[i - 1].pid < procs->procs[i].pid);
		if (procs->procs[i].pid == getpid()) {
			self = 1;
			assert_int_equal(procs->procs[i].ppid, getppid());
			assert_int_equal(procs->procs[i].pgid, getpgrp());
			assert_int_equal(procs->procs[i].uid, getuid());
			assert_string_equal(procs->procs[i].name, "test_audit");
			assert_non_null(strstr(procs->procs[i].command, "test_audit"));
			/* started in the last minute, as this test did */
			assert_true(procs->procs[i].start <= time(NULL));
			assert_true(procs->procs[i].start > time(NULL) - 60);
		}
		parent |= procs->procs[i].pid == getppid();
		assert_int_not_equal(procs->procs[i].pid, 0x7ffffff0);
	}
	assert_true(self);
	assert_true(parent);
	vd_procs_free(procs);
	vd_system_free(sys);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_squatter),   cmocka_unit_test(test_membership),
		cmocka_unit_test(test_idle),	   cmocka_unit_test(test_memory_file),
		cmocka_unit_test(test_procs_read), cmocka_unit_test(test_forged_and_unknown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
