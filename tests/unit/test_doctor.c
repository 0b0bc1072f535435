/*
 * test_doctor.c - the doctor's pure checks: a script read as code (comments
 * and strings are not), start-up lines, and the environment.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "internal.h"

static struct vd_system *demo(void)
{
	struct vd_system *sys = NULL;

	assert_int_equal(fixture_parse(&sys, demo_json, strlen(demo_json), "demo"), 0);
	return sys;
}

/* The findings of a script, as "LINE:id" joined by spaces. */
static void script_ids(char *out, size_t n, const struct vd_system *sys, const char *text,
		       const char *env_value)
{
	struct vd_findings f = { 0 };
	size_t len = 0;

	out[0] = '\0';
	assert_int_equal(vd_doctor_script(&f, sys, text, strlen(text), "s.py", env_value, NULL), 0);
	for (size_t i = 0; i < f.n; i++)
		len += (size_t)snprintf(out + len, n - len, "%s%s:%s", i ? " " : "",
					f.items[i].where + 5, f.items[i].id);
	vd_findings_release(&f);
}

static void test_script(void **state)
{
	static const struct {
		const char *text, *env, *want;
	} cases[] = {
		/* before import torch: right */
		{ "import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '1'\nimport torch\n", NULL, "" },
		{ "import torch\nimport os\nos.environ['CUDA_VISIBLE_DEVICES'] = '1'\n", NULL,
		  "3:script-after-import" },
		{ "import torch\ntorch.cuda.device_count()\nos.environ[\"CUDA_VISIBLE_DEVICES\"]=\"1\"\n",
		  NULL, "3:script-too-late" },
		/* decoys: a comment, strings, a read of the variable */
		{ "import torch\n# os.environ['CUDA_VISIBLE_DEVICES'] = '1'\n", NULL, "" },
		{ "import torch\ns = \"os.environ['CUDA_VISIBLE_DEVICES'] = '1'\"\n", NULL, "" },
		{ "import torch\nv = os.environ['CUDA_VISIBLE_DEVICES']\nw = os.environ['CUDA_VISIBLE_DEVICES'] == '1'\n",
		  NULL, "" },
		{ "'''\nimport torch\ntorch.cuda.init()\n'''\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\n",
		  NULL, "" },
		/* values the engine rejects, and misspellings */
		{ "os.environ['CUDA_VISIBLE_DEVICES'] = '0,9'\n", NULL, "1:visible-out-of-range" },
		{ "os.environ.update({'CUDA_VISIBLE_DEVICES': '1,1'})\n", NULL,
		  "1:visible-duplicate" },
		{ "os.environ.update(CUDA_VISIBLE_DEVICES='5')\n", NULL, "1:visible-out-of-range" },
		{ "os.environ['cuda_visible_devices'] = '1'\n", NULL, "1:name-near-miss" },
		/* device numbers against what the script will see */
		{ "os.environ['CUDA_VISIBLE_DEVICES'] = '2'\nx.to('cuda:0')\ny.to('cuda:1')\n",
		  NULL, "3:script-device-ordinal" },
		{ "torch.cuda.set_device(3)\n", "0,1", "1:script-device-ordinal" },
		{ "torch.cuda.set_device(3)\n", NULL, "" },
		{ "m = DataParallel(m, device_ids=[0, 1, 4])\n", NULL, "1:script-device-ordinal" },
		{ "m = DataParallel(m, device_ids=ids)\n", NULL, "" },
		/* values that are expressions, not literals: not checked, the count unknown */
		{ "os.environ['CUDA_VISIBLE_DEVICES'] = ','.join(map(str, gpus))\n"
		  "m = DataParallel(m, device_ids=[0, 1])\n",
		  NULL, "" },
		{ "os.environ['CUDA_VISIBLE_DEVICES'] = '0,' + str(3)\n", NULL, "" },
		{ "os.environ['CUDA_VISIBLE_DEVICES'] = f'{gpu}'\n", NULL, "" },
		{ "os.environ['CUDA_VISIBLE_DEVICES'] = sys.argv[1]\nm = DataParallel(m, "
		  "device_ids=[0, 1])\n",
		  "0", "" },
		/* every pair of update(), over several lines */
		{ "import torch\nos.environ.update({'CUDA_DEVICE_ORDER': 'PCI_BUS_ID', "
		  "'CUDA_VISIBLE_DEVICES': '9'})\n",
		  NULL, "2:script-after-import 2:visible-out-of-range" },
		{ "import torch\nos.environ.update(\n    CUDA_DEVICE_ORDER='PCI_BUS_ID',\n    "
		  "CUDA_VISIBLE_DEVICES='9',\n)\n",
		  NULL, "2:script-after-import 2:visible-out-of-range" },
		{ "import torch\nos.environ[\n 'CUDA_VISIBLE_DEVICES'] = '8'\n", NULL,
		  "2:script-after-import 2:visible-out-of-range" },
		/* torch imported among others, or under another name */
		{ "import os, torch\nos.environ['CUDA_VISIBLE_DEVICES'] = '1'\n", NULL,
		  "2:script-after-import" },
		{ "import torch as th\nth.cuda.device_count()\nos.environ['CUDA_VISIBLE_DEVICES'] = "
		  "'1'\n",
		  NULL, "3:script-too-late" },
		{ "import torchvision\nos.environ['CUDA_VISIBLE_DEVICES'] = '1'\n", NULL, "" },
		{ "import torch\nx.to(device='cuda')\nos.environ['CUDA_VISIBLE_DEVICES'] = '1'\n",
		  NULL, "3:script-too-late" },
		{ "import torch\nmytorch.cuda.empty_cache()\nos.environ['CUDA_VISIBLE_DEVICES'] = "
		  "'1'\n",
		  NULL, "3:script-after-import" },
		/* bytes are no device; a number too large is no number */
		{ "y = b'cuda:5'\n", NULL, "" },
		{ "torch.cuda.set_device(99999999999999999999999)\n", "0", "" },
	};
	struct vd_system *sys = demo();
	char got[512];

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		script_ids(got, sizeof(got), sys, cases[i].text, cases[i].env);
		if (strcmp(got, cases[i].want))
			fail_msg("case %zu: got '%s', want '%s'", i, got, cases[i].want);
	}
	vd_system_free(sys);
}

static void test_startup(void **state)
{
	static const char text[] = "export CUDA_VISIBLE_DEVICES=1\n"
				   "  CUDA_VISIBLE_DEVICES='0,1' # a comment\n"
				   "CUDA_VISIBLE_DEVICES=2 python x.py\n"
				   "# export CUDA_VISIBLE_DEVICES=3\n"
				   "setenv CUDA_VISIBLE_DEVICES 9\n"
				   "export CUDA_VISIBLE_DEVICES=$X\n"
				   "export CUDA_VISIBLE_DEVICES=9 CUDA_DEVICE_ORDER=PCI_BUS_ID\n"
				   "if [ -n \"$X\" ]; then export CUDA_VISIBLE_DEVICES=5; fi\n"
				   "[ -z \"$Y\" ] && export CUDA_VISIBLE_DEVICES=1\n"
				   "\texport\tCUDA_VISIBLE_DEVICES=2\n"
				   "declare -x CUDA_VISIBLE_DEVICES=3\n"
				   "export Cuda_Visible_Devices=0\n"
				   "export CUDA_VISIBLE_DEVICES=0\r\n"
				   "echo \"export CUDA_VISIBLE_DEVICES=1\"\n";
	struct vd_system *sys = demo();
	struct vd_findings f = { 0 };
	const char *want[] = { "f:1 startup-export",	   "f:2 startup-export",
			       "f:5 startup-export",	   "f:5 visible-out-of-range",
			       "f:6 startup-export",	   "f:7 startup-export",
			       "f:7 visible-out-of-range", "f:8 startup-export",
			       "f:8 visible-out-of-range", "f:9 startup-export",
			       "f:10 startup-export",	   "f:11 startup-export",
			       "f:12 name-near-miss",	   "f:13 startup-export" };

	(void)state;
	assert_int_equal(vd_doctor_startup(&f, sys, text, strlen(text), "f"), 0);
	assert_int_equal(f.n, ARRAY_SIZE(want));
	for (size_t i = 0; i < f.n; i++) {
		char got[64];

		snprintf(got, sizeof(got), "%s %s", f.items[i].where, f.items[i].id);
		assert_string_equal(got, want[i]);
	}
	/* a file written on Windows: no \r in what is said */
	assert_null(strchr(f.items[f.n - 1].message, '\r'));
	vd_findings_release(&f);
	vd_system_free(sys);
}

static void test_env(void **state)
{
	char cvd[] = "CUDA_VISIBLE_DEVICES=0,9", typo[] = "CUDA_VISBLE_DEVICES=1",
	     order[] = "CUDA_DEVICE_ORDER=PCI_BUS_ID";
	char *env[] = { cvd, typo, order, NULL };
	struct vd_system *sys = demo();
	struct vd_findings f = { 0 };

	(void)state;
	assert_int_equal(vd_doctor_env(&f, sys, env, "here"), 0);
	assert_int_equal(f.n, 2);
	assert_string_equal(f.items[0].id, "name-near-miss");
	assert_string_equal(f.items[1].id, "visible-out-of-range");
	assert_int_equal(f.items[1].severity, VD_SEVERITY_ERROR);
	assert_string_equal(f.items[1].where, "here");
	vd_findings_release(&f);
	/* another vendor's variable is no misspelling; the order is said as it is set */
	{
		char musa[] = "MUSA_VISIBLE_DEVICES=0",
		     fastest[] = "CUDA_DEVICE_ORDER=FASTEST_FIRST",
		     bogus[] = "CUDA_DEVICE_ORDER=bogus";
		char *env2[] = { musa, fastest, NULL }, *env3[] = { bogus, NULL };

		assert_int_equal(vd_doctor_env(&f, sys, env2, "here"), 0);
		assert_int_equal(f.n, 1);
		assert_string_equal(f.items[0].id, "order-fastest-first");
		assert_non_null(
			strstr(f.items[0].message, "CUDA_DEVICE_ORDER is FASTEST_FIRST on"));
		vd_findings_release(&f);
		assert_int_equal(vd_doctor_env(&f, sys, env3, "here"), 0);
		assert_int_equal(f.n, 1);
		assert_string_equal(f.items[0].id, "order-unknown");
		vd_findings_release(&f);
	}
	assert_string_equal(vd_severity_name(VD_SEVERITY_WARNING), "warning");
	assert_null(vd_severity_name((enum vd_severity)7));
	vd_system_free(sys);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_script),
		cmocka_unit_test(test_startup),
		cmocka_unit_test(test_env),
	};

	return cmocka_run_group_tests_name("doctor", tests, NULL, NULL);
}
