/*
 * _visdev.c - the Python module's C part (visdev imports it whole): libvisdev from inside a script,
 * before `import torch`. The same engine, backends, leases and line as the CLI; no rule is written
 * again here: this file only turns Python into the library's calls and its answers back into
 * Python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "visdev.h"

/* visdev.Error, and its kinds; ArgumentError is a ValueError too. */
static PyObject *Error, *NoFitError, *TooLateError, *ArgumentError;

/*
 * What this process was given before acquire() first wrote the variable
 * (the parent's restriction), and what it wrote last: a later acquire() in
 * the same process chooses under the former, not under its own choice.
 */
static int wrote;
static char *given, *given_order, *written;

/*
 * The restriction a choice is made under, and the order its ordinals count
 * in: the parent's, not one of ours (ours is always in PCI bus order).
 */
static const char *restriction(enum vd_order *order)
{
	const char *now = getenv("CUDA_VISIBLE_DEVICES");
	int ours = wrote && now && written && !strcmp(now, written);

	*order = VD_ORDER_FASTEST;
	vd_order_parse(order, ours ? given_order : getenv("CUDA_DEVICE_ORDER"));
	return ours ? given : now;
}

/* Which backend: the environment's (VISDEV_FIXTURE, VISDEV_NVML_LIB), or the one chosen. */
static int use_demo_flag;
static char *fixture_path;

/* Raises visdev.Error (or ValueError for VD_EINVAL) with the library's message. */
static PyObject *raise_library(int err)
{
	PyErr_SetString(err == VD_EINVAL ? ArgumentError :
			err == VD_ENOMEM ? PyExc_MemoryError :
					   Error,
			vd_error_last());
	return NULL;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static int name_helper(void);

/* A snapshot of the machine from the backend chosen. */
static int snapshot(struct vd_system **out)
{
	struct vd_backend_options opts = { 0 };
	struct vd_backend *b = NULL;
	int err;

	if (name_helper()) {
		PyErr_NoMemory();
		return VD_ENOMEM;
	}
	opts.demo = use_demo_flag;
	opts.fixture = fixture_path;
	opts.use_env = 1;
	err = vd_backend_open(&b, &opts);
	if (!err)
		err = vd_backend_snapshot(out, b);
	vd_backend_free(b);
	if (err)
		raise_library(err);
	return err;
}

/* ---- small builders ------------------------------------------------------ */

/* types.SimpleNamespace(**dict), stealing dict. */
static PyObject *namespace(PyObject *dict)
{
	static PyObject *ns_type;
	PyObject *args, *o;

	if (!dict)
		return NULL;
	if (!ns_type) {
		PyObject *types = PyImport_ImportModule("types");

		ns_type = types ? PyObject_GetAttrString(types, "SimpleNamespace") : NULL;
		Py_XDECREF(types);
		if (!ns_type) {
			Py_DECREF(dict);
			return NULL;
		}
	}
	args = PyTuple_New(0);
	o = args ? PyObject_Call(ns_type, args, dict) : NULL;
	Py_XDECREF(args);
	Py_DECREF(dict);
	return o;
}

/* A known integer, or None. */
static PyObject *known(int ok, long long v)
{
	if (ok)
		return PyLong_FromLongLong(v);
	Py_RETURN_NONE;
}

/* Sets key in dict to value, stealing value; -1 on failure. */
static int put(PyObject *dict, const char *key, PyObject *value)
{
	int r;

	if (!value)
		return -1;
	r = PyDict_SetItemString(dict, key, value);
	Py_DECREF(value);
	return r;
}

/* A device as `map` and `pick` name it: index, uuid, name, pci_bus_id (and gi, ci, profile). */
static PyObject *device_dict(const struct vd_system *sys, struct vd_device_ref d)
{
	const struct vd_gpu *g = &sys->gpus[d.gpu];
	PyObject *o = PyDict_New();

	if (!o || put(o, "index", PyLong_FromUnsignedLong(g->index)) ||
	    put(o, "uuid", PyUnicode_FromString(d.mig >= 0 ? g->mig[d.mig].uuid : g->uuid)) ||
	    put(o, "name", PyUnicode_DecodeUTF8(g->name, (Py_ssize_t)strlen(g->name), "replace")) ||
	    put(o, "pci_bus_id", PyUnicode_FromString(g->pci_bus_id)))
		goto fail;
	if (d.mig >= 0 &&
	    (put(o, "gi", PyLong_FromUnsignedLong(g->mig[d.mig].gi)) ||
	     put(o, "ci", PyLong_FromUnsignedLong(g->mig[d.mig].ci)) ||
	     put(o, "profile",
		 g->mig[d.mig].profile[0] ? PyUnicode_FromString(g->mig[d.mig].profile) :
					    (Py_INCREF(Py_None), Py_None))))
		goto fail;
	return o;
fail:
	Py_XDECREF(o);
	return NULL;
}

/* ---- too late? ------------------------------------------------------------ */

/*
 * Whether CUDA has already started in this process, so that the variable
 * would silently do nothing: the CUDA driver is loaded and answers
 * cuDeviceGetCount with anything but CUDA_ERROR_NOT_INITIALIZED (3); or
 * torch says it initialised CUDA. Returns 1 with why, 0, -1 on a Python error.
 */
static int too_late(char *why, size_t n)
{
	const char *lib = getenv("VISDEV_CUDA_LIB") ? getenv("VISDEV_CUDA_LIB") : "libcuda.so.1";
	void *h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
	PyObject *modules, *torch;

	if (h) {
		int (*count)(int *) = (int (*)(int *))dlsym(h, "cuDeviceGetCount");
		int c = 0, r = count ? count(&c) : 3;

		dlclose(h);
		if (r != 3) {
			snprintf(
				why, n,
				"CUDA has already started in this process (the CUDA driver answers "
				"cuDeviceGetCount): CUDA_VISIBLE_DEVICES would now do nothing; call "
				"visdev.acquire() before anything uses CUDA (torch.cuda.is_available() "
				"and device_count() start it too)");
			return 1;
		}
	}
	modules = PyImport_GetModuleDict();
	torch = modules ? PyDict_GetItemString(modules, "torch") : NULL;
	if (torch) {
		PyObject *cuda = PyObject_GetAttrString(torch, "cuda");
		PyObject *init = cuda ? PyObject_CallMethod(cuda, "is_initialized", NULL) : NULL;
		int yes = init && PyObject_IsTrue(init) == 1;

		Py_XDECREF(cuda);
		Py_XDECREF(init);
		PyErr_Clear();
		if (yes) {
			snprintf(why, n,
				 "torch has already initialised CUDA in this process: "
				 "CUDA_VISIBLE_DEVICES would now do nothing; call visdev.acquire() "
				 "before anything uses CUDA");
			return 1;
		}
	}
	return 0;
}

/* ---- the Lease ----------------------------------------------------------- */

typedef struct {
	PyObject_HEAD struct vd_lease *lease; /* NULL: released, or the CPU */
	int released;
	PyObject *devices; /* list of dicts */
	PyObject *env;	   /* dict of what was written into os.environ */
	PyObject *value;   /* CUDA_VISIBLE_DEVICES */
} LeaseObject;

/*
 * Leases whose objects are gone unreleased: the GPUs stay this process's
 * until it ends, as the contract says, however the object was dropped.
 */
static struct vd_lease **kept;
static size_t nkept;

static void lease_dealloc(LeaseObject *self)
{
	struct vd_lease **more = self->lease ? realloc(kept, (nkept + 1) * sizeof(*kept)) : NULL;

	if (more) {
		kept = more;
		kept[nkept++] = self->lease;
	} else {
		vd_lease_free(self->lease); /* out of memory: let go rather than lose it */
	}
	Py_XDECREF(self->devices);
	Py_XDECREF(self->env);
	Py_XDECREF(self->value);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *lease_release(LeaseObject *self, PyObject *unused)
{
	(void)unused;
	vd_lease_free(self->lease);
	self->lease = NULL;
	self->released = 1;
	Py_RETURN_NONE;
}

static PyObject *lease_enter(LeaseObject *self, PyObject *unused)
{
	(void)unused;
	Py_INCREF(self);
	return (PyObject *)self;
}

static PyObject *lease_exit(LeaseObject *self, PyObject *args)
{
	(void)args;
	return lease_release(self, NULL);
}

static PyObject *lease_repr(LeaseObject *self)
{
	return PyUnicode_FromFormat("<visdev.Lease CUDA_VISIBLE_DEVICES=%R%s>", self->value,
				    self->released ? " released" : "");
}

static PyObject *lease_get_released(LeaseObject *self, void *closure)
{
	(void)closure;
	return PyBool_FromLong(self->released);
}

static PyMethodDef lease_methods[] = {
	{ "release", (PyCFunction)lease_release, METH_NOARGS,
	  "release($self, /)\n--\n\nLets go of the GPUs now (also at the end of a with block, "
	  "or of the process). The environment is left as it is." },
	{ "__enter__", (PyCFunction)lease_enter, METH_NOARGS,
	  "__enter__($self, /)\n--\n\nThe lease itself, for a with block." },
	{ "__exit__", (PyCFunction)lease_exit, METH_VARARGS,
	  "__exit__($self, *exc)\n--\n\nReleases the lease at the end of a with block." },
	{ NULL, NULL, 0, NULL },
};

static PyMemberDef lease_members[] = {
	{ "devices", T_OBJECT_EX, offsetof(LeaseObject, devices), READONLY,
	  "The devices leased, best first: dicts with index, uuid, name, pci_bus_id (and gi, ci, "
	  "profile for a MIG device); [] for the CPU." },
	{ "env", T_OBJECT_EX, offsetof(LeaseObject, env), READONLY,
	  "What was written into os.environ: CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER." },
	{ "cuda_visible_devices", T_OBJECT_EX, offsetof(LeaseObject, value), READONLY,
	  "The value of CUDA_VISIBLE_DEVICES written; '' for the CPU." },
	{ NULL, 0, 0, 0, NULL },
};

static PyGetSetDef lease_getset[] = {
	{ "released", (getter)lease_get_released, NULL, "Whether release() was called.", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject LeaseType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "visdev.Lease",
	.tp_basicsize = sizeof(LeaseObject),
	.tp_dealloc = (destructor)lease_dealloc,
	.tp_repr = (reprfunc)lease_repr,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "GPUs leased by visdev.acquire(): held until release(), the end of a with "
		  "block, or the end of the process (kill -9 included).",
	.tp_methods = lease_methods,
	.tp_members = lease_members,
	.tp_getset = lease_getset,
};

/* ---- acquire ----------------------------------------------------------- */

/* Writes name=value into os.environ (which sets the C environment too). */
static int set_environ(const char *name, const char *value)
{
	PyObject *os = PyImport_ImportModule("os"), *environ, *v;
	int r = -1;

	environ = os ? PyObject_GetAttrString(os, "environ") : NULL;
	v = environ ? PyUnicode_FromString(value) : NULL;
	if (v)
		r = PyMapping_SetItemString(environ, name, v);
	Py_XDECREF(v);
	Py_XDECREF(environ);
	Py_XDECREF(os);
	return r;
}

/* A size: a str with its unit ("20G"), read as the CLI reads it. */
static int parse_size(uint64_t *out, PyObject *o, const char *what)
{
	const char *s;
	int err;

	if (o == Py_None) {
		*out = 0;
		return 0;
	}
	if (!PyUnicode_Check(o)) {
		PyErr_Format(ArgumentError,
			     "%s takes a size with its unit, such as '20G', '20GiB' or '20480M'",
			     what);
		return -1;
	}
	s = PyUnicode_AsUTF8(o);
	if (!s)
		return -1;
	err = vd_parse_size_mib(out, s);
	if (err) {
		PyErr_Format(ArgumentError, "%s: %s", what, vd_error_last());
		return -1;
	}
	return 0;
}

/* NoFitError(message) with .reasons: one dict per device (or the request), pick --json's. */
static void raise_nofit(const struct vd_system *sys, const struct vd_choice *choice,
			const char *message)
{
	PyObject *reasons = PyList_New(0), *exc;

	for (size_t i = 0; reasons && choice && i < choice->nreasons; i++) {
		const struct vd_reason *r = &choice->why[i];
		PyObject *d =
			r->device.gpu == VD_NO_GPU ? PyDict_New() : device_dict(sys, r->device);

		if (!d ||
		    (r->device.gpu == VD_NO_GPU &&
		     put(d, "index", (Py_INCREF(Py_None), Py_None))) ||
		    put(d, "reason", PyUnicode_FromString(r->code)) ||
		    put(d, "why",
			PyUnicode_DecodeUTF8(choice->reasons[i],
					     (Py_ssize_t)strlen(choice->reasons[i]), "replace")) ||
		    PyList_Append(reasons, d)) {
			Py_XDECREF(d);
			Py_CLEAR(reasons);
			break;
		}
		Py_DECREF(d);
	}
	if (!reasons)
		return;
	exc = PyObject_CallFunction(NoFitError, "s", message);
	if (exc && PyObject_SetAttrString(exc, "reasons", reasons) == 0)
		PyErr_SetObject(NoFitError, exc);
	Py_XDECREF(exc);
	Py_DECREF(reasons);
}

/* A text argument (None: NULL) as UTF-8 without a NUL; ArgumentError otherwise. */
static int text_arg(const char **out, PyObject *o, const char *what)
{
	Py_ssize_t len;

	*out = NULL;
	if (o == Py_None)
		return 0;
	if (PyUnicode_Check(o) && (*out = PyUnicode_AsUTF8AndSize(o, &len)) &&
	    strlen(*out) == (size_t)len)
		return 0;
	PyErr_Clear();
	PyErr_Format(ArgumentError, "%s is text (a str without NUL or lone surrogates)", what);
	*out = NULL;
	return -1;
}

/* The selection options from acquire's arguments. Returns 0, or -1 with a Python error. */
struct request {
	struct vd_select_options opts;
	unsigned *exclude;
	double wait; /* seconds; -1 for ever; -2 no wait */
};

static int read_request(struct request *r, PyObject *n, PyObject *min_free, PyObject *max_util,
			const char *model, PyObject *exclude, const char *policy, PyObject *mem,
			PyObject *wait)
{
	long count = n ? (PyLong_Check(n) && !PyBool_Check(n) ? PyLong_AsLong(n) : -1) : 1;

	vd_select_options_init(&r->opts);
	if (count < 1 || count > 4096) {
		PyErr_Clear();
		PyErr_SetString(ArgumentError, "n is how many GPUs: a whole number from 1");
		return -1;
	}
	r->opts.n = (unsigned)count;
	if (parse_size(&r->opts.min_free_mib, min_free, "min_free") ||
	    parse_size(&r->opts.mem_mib, mem, "mem"))
		return -1;
	if (max_util != Py_None) {
		long v = PyLong_AsLong(max_util);

		if ((v == -1 && PyErr_Occurred()) || v < 0 || v > 100) {
			PyErr_Clear();
			PyErr_SetString(ArgumentError, "max_util is a percentage, from 0 to 100");
			return -1;
		}
		r->opts.max_util = (int)v;
	}
	r->opts.model = model;
	if (policy && vd_policy_parse(&r->opts.policy, policy)) {
		PyErr_SetString(ArgumentError, vd_error_last());
		return -1;
	}
	if (exclude != Py_None) {
		PyObject *seq = PySequence_Fast(exclude, "exclude is a list of GPU indices");
		Py_ssize_t k;

		if (!seq) {
			PyErr_Clear();
			PyErr_SetString(ArgumentError, "exclude is a list of GPU indices, from 0");
			return -1;
		}
		k = PySequence_Fast_GET_SIZE(seq);
		r->exclude = calloc((size_t)k + 1, sizeof(*r->exclude));
		for (Py_ssize_t i = 0; r->exclude && i < k; i++) {
			long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));

			if (v < 0 || v > 1000000 || PyErr_Occurred()) {
				PyErr_Clear();
				PyErr_SetString(ArgumentError,
						"exclude is a list of GPU indices, from 0");
				Py_DECREF(seq);
				return -1;
			}
			r->exclude[i] = (unsigned)v;
		}
		Py_DECREF(seq);
		if (!r->exclude) {
			PyErr_NoMemory();
			return -1;
		}
		r->opts.exclude = r->exclude;
		r->opts.nexclude = (size_t)k;
	}
	r->wait = -2;
	if (wait == Py_True)
		r->wait = -1;
	else if (wait != Py_None && wait != Py_False) {
		r->wait = PyFloat_AsDouble(wait);
		if (PyErr_Occurred() || !(r->wait >= 0) || r->wait > 1e9) {
			PyErr_Clear();
			PyErr_SetString(ArgumentError,
					"wait is True (for ever) or a number of seconds");
			return -1;
		}
	}
	return 0;
}

/*
 * Leases devices as `visdev run` does: under the parent's restriction (this
 * process's CUDA_VISIBLE_DEVICES), waiting in the same line when asked. The
 * GIL is let go while waiting; Ctrl-C ends the wait with KeyboardInterrupt,
 * and the place in line goes with the waiter.
 */
static int take(struct vd_lease **out, struct vd_system **sys, struct vd_choice **choice,
		const struct request *r, const char *command)
{
	struct vd_waiter *w = NULL;
	struct vd_resolution *parent = NULL;
	const char *dir = vd_lease_dir();
	double start = now_s();
	int err = 0;

	if (r->wait != -2 && (err = vd_waiter_new(&w, dir)) != 0) {
		raise_library(err);
		return -1;
	}
	for (;;) {
		enum vd_order order;
		const char *value;

		/* a Ctrl-C that came before a wait (while the driver was asked, or between tries
		   of a busy lock) interrupts no wait: it is seen here */
		if (PyErr_CheckSignals()) {
			err = -1;
			break;
		}
		vd_resolution_free(parent);
		parent = NULL;
		vd_system_free(*sys);
		*sys = NULL;
		vd_choice_free(*choice);
		*choice = NULL;
		if (snapshot(sys)) {
			err = -1;
			break;
		}
		value = restriction(&order);
		err = vd_visible_resolve(&parent, *sys, value, order);
		if (!err) {
			Py_BEGIN_ALLOW_THREADS err =
				w ? vd_waiter_acquire(w, out, choice, *sys, parent, &r->opts,
						      command) :
				    vd_lease_acquire(out, choice, dir, *sys, parent, &r->opts,
						     command);
			Py_END_ALLOW_THREADS
		}
		/* a signal (Ctrl-C) while the lock was awaited: KeyboardInterrupt, or again */
		if (err == VD_EINTR) {
			if (PyErr_CheckSignals()) {
				err = -1;
				break;
			}
			continue;
		}
		/* the allocation lock held by another for a moment: as run, 2 s (or the wait) */
		if (err == VD_EBUSY && now_s() - start < (r->wait == -1 ? 1e18 :
							  r->wait > 2	? r->wait :
									  2))
			continue;
		if (err != VD_ENOFIT || !w || (*choice)->never ||
		    (r->wait >= 0 && now_s() - start >= r->wait))
			break;
		/* in line: wait for a turn, a second at most between looks */
		Py_BEGIN_ALLOW_THREADS err = vd_waiter_wait(w, 1000);
		Py_END_ALLOW_THREADS if (PyErr_CheckSignals())
		{
			err = -1;
			break;
		}
		if (err < 0 && err != VD_EINTR)
			break;
	}
	vd_resolution_free(parent);
	vd_waiter_free(w); /* out of the line, whatever happened */
	if (err > 0)
		err = 0;
	return err;
}

/* The script's command line, for the lease record: "python train.py --lr 1". */
static void script_command(char *buf, size_t n)
{
	PyObject *argv = PySys_GetObject("argv"); /* borrowed */
	size_t len = (size_t)snprintf(buf, n, "python");

	for (Py_ssize_t i = 0; argv && PyList_Check(argv) && i < PyList_Size(argv) && len < n;
	     i++) {
		const char *a = PyUnicode_Check(PyList_GetItem(argv, i)) ?
					PyUnicode_AsUTF8(PyList_GetItem(argv, i)) :
					NULL;

		if (!a) {
			PyErr_Clear();
			continue;
		}
		len += (size_t)snprintf(buf + len, n - len, " %s", a);
	}
}

PyDoc_STRVAR(acquire_doc,
	     "acquire(n=1, *, min_free=None, max_util=None, model=None, exclude=None, policy=None, "
	     "mem=None, wait=None, or_cpu=False)\n--\n\n"
	     "Chooses n GPUs that fit, leases them so that no other visdev job takes them, and\n"
	     "writes CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER=PCI_BUS_ID into os.environ.\n"
	     "Call it before anything starts CUDA (before `import torch` is safest).\n\n"
	     "min_free, mem: sizes with their unit ('20G'); max_util: percent; model: a pattern\n"
	     "on the GPU's name ('A100', 'H100*HBM3'); exclude: GPU indices; policy:\n"
	     "'most-free' (default), 'least-used' or 'pack'; mem: share a GPU, reserving that\n"
	     "much of its memory; wait: True to wait in line for ever, or seconds; or_cpu: when\n"
	     "nothing fits, an empty CUDA_VISIBLE_DEVICES (the CPU) and a RuntimeWarning.\n\n"
	     "Returns a Lease, held until lease.release(), the end of a with block or of the\n"
	     "process. Raises NoFitError (with .reasons) when nothing fits, TooLateError when\n"
	     "CUDA has already started in this process, ValueError for a bad argument.");

static PyObject *acquire(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "n",	   "min_free", "max_util", "model",  "exclude",
				 "policy", "mem",      "wait",	   "or_cpu", NULL };
	PyObject *n = NULL, *min_free = Py_None, *max_util = Py_None, *exclude = Py_None,
		 *mem = Py_None, *wait = Py_None, *model_obj = Py_None, *policy_obj = Py_None;
	const char *model = NULL, *policy = NULL;
	enum vd_order order;
	int or_cpu = 0, err;
	struct request r = { 0 };
	struct vd_system *sys = NULL;
	struct vd_choice *choice = NULL;
	struct vd_lease *lease = NULL;
	LeaseObject *obj = NULL;
	char why[512], *value = NULL, command[VD_COMMAND_MAX];
	const struct vd_device_ref *devs;
	size_t ndevs;

	(void)self;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O$OOOOOOOp", names, &n, &min_free, &max_util,
					 &model_obj, &exclude, &policy_obj, &mem, &wait, &or_cpu))
		return NULL;
	if (text_arg(&model, model_obj, "model") || text_arg(&policy, policy_obj, "policy") ||
	    read_request(&r, n, min_free, max_util, model, exclude, policy, mem, wait))
		goto out;
	err = too_late(why, sizeof(why));
	if (err) {
		if (err > 0)
			PyErr_SetString(TooLateError, why);
		goto out;
	}
	script_command(command, sizeof(command));
	err = take(&lease, &sys, &choice, &r, command);
	if (err == -1 && PyErr_Occurred())
		goto out;
	if (err == VD_ENOFIT && !or_cpu) {
		raise_nofit(sys, choice, vd_error_last());
		goto out;
	}
	if (err && err != VD_ENOFIT) {
		raise_library(err);
		goto out;
	}
	obj = PyObject_New(LeaseObject, &LeaseType);
	if (!obj)
		goto out;
	obj->lease = NULL;
	obj->released = 0;
	obj->devices = PyList_New(0);
	obj->env = PyDict_New();
	obj->value = NULL;
	if (!obj->devices || !obj->env)
		goto fail;
	if (err == VD_ENOFIT) {
		if (PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
				     "%s; running on the CPU (or_cpu=True)", vd_error_last()))
			goto fail;
		value = strdup("");
	} else {
		devs = vd_lease_devices(lease, &ndevs);
		/* UUIDs under a parent's restriction: they mean the same in any order */
		err = vd_child_value(&value, sys, NULL, devs, ndevs,
				     restriction(&order) ? VD_FORMAT_UUID : -1);
		if (err) {
			raise_library(err);
			goto fail;
		}
		for (size_t i = 0; i < ndevs; i++) {
			PyObject *d = device_dict(sys, devs[i]);

			if (!d || PyList_Append(obj->devices, d)) {
				Py_XDECREF(d);
				goto fail;
			}
			Py_DECREF(d);
		}
	}
	if (!value) {
		PyErr_NoMemory();
		goto fail;
	}
	if (!wrote) {
		const char *now = getenv("CUDA_VISIBLE_DEVICES"), *o = getenv("CUDA_DEVICE_ORDER");

		given = now ? strdup(now) : NULL;
		given_order = o ? strdup(o) : NULL;
		wrote = 1;
	}
	free(written);
	written = strdup(value);
	obj->value = PyUnicode_FromString(value);
	if (!obj->value || put(obj->env, "CUDA_VISIBLE_DEVICES", PyUnicode_FromString(value)) ||
	    put(obj->env, "CUDA_DEVICE_ORDER", PyUnicode_FromString("PCI_BUS_ID")) ||
	    set_environ("CUDA_VISIBLE_DEVICES", value) ||
	    set_environ("CUDA_DEVICE_ORDER", "PCI_BUS_ID"))
		goto fail;
	obj->lease = lease;
	lease = NULL;
	goto out;
fail:
	Py_CLEAR(obj);
out:
	free(value);
	free(r.exclude);
	vd_lease_free(lease);
	vd_choice_free(choice);
	vd_system_free(sys);
	return (PyObject *)obj;
}

/* ---- reading ------------------------------------------------------------- */

/* The queue whose job holds a lease ({"journal", "job"}), or None. */
static PyObject *queue_of(const struct vd_lease_holder *h)
{
	PyObject *d;

	if (!h->journal[0])
		Py_RETURN_NONE;
	d = PyDict_New();
	if (!d ||
	    put(d, "journal",
		PyUnicode_DecodeUTF8(h->journal, (Py_ssize_t)strlen(h->journal), "replace")) ||
	    put(d, "job", PyLong_FromLongLong(h->job))) {
		Py_XDECREF(d);
		return NULL;
	}
	return d;
}

/* A lease as `list --json` and `leases --json` give it. */
static PyObject *lease_dict(const struct vd_lease_holder *h)
{
	PyObject *d = PyDict_New();
	char since[32];

	vd_format_time(since, sizeof(since), h->since);
	if (!d ||
	    put(d, "user", PyUnicode_DecodeUTF8(h->user, (Py_ssize_t)strlen(h->user), "replace")) ||
	    put(d, "uid", PyLong_FromUnsignedLong(h->uid)) ||
	    put(d, "pid", PyLong_FromLong(h->pid)) || put(d, "pgid", PyLong_FromLong(h->pgid)) ||
	    put(d, "command",
		PyUnicode_DecodeUTF8(h->command, (Py_ssize_t)strlen(h->command), "replace")) ||
	    put(d, "since", PyUnicode_FromString(since)) ||
	    put(d, "mode",
		PyUnicode_FromString(h->mode == VD_LEASE_SHARED ? "shared" : "exclusive")) ||
	    put(d, "mem_mib",
		h->mode == VD_LEASE_SHARED ? PyLong_FromUnsignedLongLong(h->mem_mib) :
					     (Py_INCREF(Py_None), Py_None)) ||
	    put(d, "queue", queue_of(h))) {
		Py_XDECREF(d);
		return NULL;
	}
	return d;
}

/* What the lease audit says of lease i, as list --json gives it (None: no audit). */
static PyObject *lease_audit(const struct vd_audit *a, size_t i)
{
	const struct vd_lease_audit *la = a && i < a->nleases ? &a->leases[i] : NULL;
	PyObject *d;

	if (!la)
		Py_RETURN_NONE;
	d = PyDict_New();
	if (!d || put(d, "use", PyUnicode_FromString(vd_lease_use_name(la->use))) ||
	    put(d, "quiet_s", known(la->quiet_s >= 0, la->quiet_s)) ||
	    put(d, "squatters", PyLong_FromSize_t(la->nsquatters)) ||
	    put(d, "unexplained_mib", PyLong_FromLongLong(la->unexplained_mib))) {
		Py_XDECREF(d);
		return NULL;
	}
	return namespace(d);
}

/*
 * The leases on the device of that UUID, as objects with their audit (holds
 * for the line are not leases).
 */
static PyObject *leases_on(const struct vd_leases *l, const struct vd_audit *a, const char *uuid)
{
	PyObject *list = PyList_New(0);

	for (size_t i = 0; list && l && i < l->n; i++) {
		PyObject *d, *o;

		if (l->holders[i].mode == VD_LEASE_HELD || strcmp(l->holders[i].uuid, uuid))
			continue;
		d = lease_dict(&l->holders[i]);
		if (d && put(d, "audit", lease_audit(a, i)))
			Py_CLEAR(d);
		o = namespace(d);
		if (!o || PyList_Append(list, o))
			Py_CLEAR(list);
		Py_XDECREF(o);
	}
	return list;
}

/* "state", "reservable_mib", "unexplained_mib" of device d: the judgement pick and run make. */
static int put_state(PyObject *o, const struct vd_system *sys, const struct vd_leases *l,
		     struct vd_device_ref d)
{
	struct vd_device_status st;

	if (vd_device_status(&st, sys, l, d))
		return put(o, "state", (Py_INCREF(Py_None), Py_None)) ||
		       put(o, "reservable_mib", (Py_INCREF(Py_None), Py_None)) ||
		       put(o, "unexplained_mib", (Py_INCREF(Py_None), Py_None));
	return put(o, "state", PyUnicode_FromString(vd_state_name(st.state))) ||
	       put(o, "reservable_mib", known(st.reservable_mib >= 0, st.reservable_mib)) ||
	       put(o, "unexplained_mib", PyLong_FromLongLong(st.unexplained_mib));
}

/* cuda:N of device d under res, or None. */
static PyObject *cuda_of(const struct vd_resolution *res, struct vd_device_ref d)
{
	int c = res ? vd_resolution_cuda(res, d) : -1;

	return known(c >= 0, c);
}

/* A string from users or processes, or None when empty. */
static PyObject *text_or_none(const char *s)
{
	if (!*s)
		Py_RETURN_NONE;
	return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
}

/* A process on a GPU, as list --json gives it: pid, user, used_mib, name. */
static PyObject *process_object(const struct vd_process *p)
{
	PyObject *d = PyDict_New();

	if (!d || put(d, "pid", PyLong_FromUnsignedLong(p->pid)) ||
	    put(d, "user", text_or_none(p->user)) ||
	    put(d, "used_mib", known(p->used_known, (long long)p->used_mib)) ||
	    put(d, "name", text_or_none(p->name))) {
		Py_XDECREF(d);
		return NULL;
	}
	return namespace(d);
}

/* A MIG device, as list --json gives it. */
static PyObject *mig_object(const struct vd_system *sys, const struct vd_leases *l,
			    const struct vd_audit *a, const struct vd_resolution *res,
			    struct vd_device_ref md)
{
	const struct vd_mig *mi = &sys->gpus[md.gpu].mig[md.mig];
	PyObject *d = device_dict(sys, md);
	int mm = mi->fields & VD_GPU_MEMORY;

	if (!d || put(d, "memory_total_mib", known(mm, (long long)mi->memory_total_mib)) ||
	    put(d, "memory_used_mib", known(mm, (long long)mi->memory_used_mib)) ||
	    put(d, "memory_free_mib", known(mm, vd_device_memory_free_mib(sys, md))) ||
	    put_state(d, sys, l, md) || put(d, "cuda", cuda_of(res, md)) ||
	    put(d, "leases", leases_on(l, a, mi->uuid))) {
		Py_XDECREF(d);
		return NULL;
	}
	return namespace(d);
}

/* Appends o (stolen) to list; -1 when o is NULL or it cannot. */
static int append(PyObject *list, PyObject *o)
{
	int r = o ? PyList_Append(list, o) : -1;

	Py_XDECREF(o);
	return r;
}

PyDoc_STRVAR(devices_doc, "devices()\n--\n\n"
			  "Every GPU of the machine, as `visdev list --json` describes it: objects "
			  "whose attributes\nare its keys (index, uuid, name, pci_bus_id, lost, "
			  "memory_total_mib, ... , processes, mig).");

static PyObject *gpu_object(const struct vd_system *sys, size_t i, const struct vd_leases *l,
			    const struct vd_audit *a, const struct vd_resolution *res)
{
	const struct vd_gpu *g = &sys->gpus[i];
	struct vd_device_ref whole = { (unsigned)i, -1 };
	PyObject *o = PyDict_New(), *procs, *migs;
	int mem = g->fields & VD_GPU_MEMORY;

	if (!o)
		return NULL;
	if (g->fields & VD_GPU_PROCESSES) {
		procs = PyList_New(0);
		for (size_t k = 0; procs && k < g->nprocesses; k++)
			if (append(procs, process_object(&g->processes[k])))
				Py_CLEAR(procs);
	} else {
		procs = Py_None;
		Py_INCREF(procs);
	}
	migs = PyList_New(0);
	for (size_t m = 0; migs && m < g->nmig; m++)
		if (append(migs, mig_object(sys, l, a, res,
					    (struct vd_device_ref){ (unsigned)i, (int)m })))
			Py_CLEAR(migs);
	/* put() takes its value, even when it fails: nothing to let go of after it */
	if (!procs || !migs || put(o, "index", PyLong_FromUnsignedLong(g->index)) ||
	    put(o, "uuid", PyUnicode_FromString(g->uuid)) ||
	    put(o, "name", PyUnicode_DecodeUTF8(g->name, (Py_ssize_t)strlen(g->name), "replace")) ||
	    put(o, "pci_bus_id", PyUnicode_FromString(g->pci_bus_id)) ||
	    put(o, "lost", PyBool_FromLong(g->lost)) || put_state(o, sys, l, whole) ||
	    put(o, "memory_total_mib", known(mem, (long long)g->memory_total_mib)) ||
	    put(o, "memory_used_mib", known(mem, (long long)g->memory_used_mib)) ||
	    put(o, "memory_free_mib", known(mem, vd_gpu_memory_free_mib(g))) ||
	    put(o, "utilization_gpu", known(g->fields & VD_GPU_UTILIZATION, g->utilization_gpu)) ||
	    put(o, "temperature_c", known(g->fields & VD_GPU_TEMPERATURE, g->temperature_c)) ||
	    put(o, "power_w",
		(g->fields & VD_GPU_POWER) ? PyFloat_FromDouble(g->power_mw / 1000.0) :
					     (Py_INCREF(Py_None), Py_None)) ||
	    put(o, "numa_node", known(g->fields & VD_GPU_NUMA, g->numa_node)) ||
	    put(o, "cuda_rank", known(g->fields & VD_GPU_CUDA_RANK, g->cuda_rank))) {
		Py_XDECREF(procs);
		Py_XDECREF(migs);
		Py_DECREF(o);
		return NULL;
	}
	if (put(o, "processes", procs)) {
		Py_DECREF(migs);
		Py_DECREF(o);
		return NULL;
	}
	if (put(o, "mig_mode", PyBool_FromLong(g->mig_mode)) || put(o, "mig", migs) ||
	    put(o, "cuda", cuda_of(res, whole)) || put(o, "leases", leases_on(l, a, g->uuid))) {
		Py_DECREF(o);
		return NULL;
	}
	return namespace(o);
}

static PyObject *devices(PyObject *self, PyObject *unused)
{
	struct vd_system *sys = NULL;
	struct vd_leases *l = NULL;
	struct vd_line *line = NULL;
	struct vd_resolution *res = NULL;
	struct vd_audit *audit = NULL;
	enum vd_order order = VD_ORDER_FASTEST;
	char *warning = NULL;
	PyObject *list;

	(void)self;
	(void)unused;
	if (snapshot(&sys))
		return NULL;
	vd_order_parse(&order, getenv("CUDA_DEVICE_ORDER"));
	if (vd_visible_resolve(&res, sys, getenv("CUDA_VISIBLE_DEVICES"), order)) {
		vd_system_free(sys);
		return PyErr_NoMemory();
	}
	/* as list: the GPUs are worth describing even when the leases cannot be read */
	if (vd_leases_read(&l, vd_lease_dir(), sys)) {
		/* as list says on stderr: the states are then those of no lease at all */
		if (PyErr_WarnFormat(PyExc_RuntimeWarning, 1, "leases unknown: %s",
				     vd_error_last())) {
			vd_resolution_free(res);
			vd_system_free(sys);
			return NULL;
		}
	} else {
		/* the audit as list makes it, before the line's holds join the leases */
		if (vd_audit_now(&audit, NULL, sys, l, VD_AUDIT_IDLE_DEFAULT_MIN * 60, &warning)) {
			vd_leases_free(l);
			vd_resolution_free(res);
			vd_system_free(sys);
			return PyErr_NoMemory();
		}
		if (vd_line_read(&line, vd_lease_dir()) == 0 && vd_line_plan(line, sys, l) == 0)
			vd_line_holds(l, line, sys);
	}
	list = warning && PyErr_WarnFormat(PyExc_RuntimeWarning, 1, "%s", warning) ? NULL :
										     PyList_New(0);
	for (size_t i = 0; list && i < sys->ngpus; i++)
		if (append(list, gpu_object(sys, i, l, audit, res)))
			Py_CLEAR(list);
	free(warning);
	vd_audit_free(audit);
	vd_line_free(line);
	vd_leases_free(l);
	vd_resolution_free(res);
	vd_system_free(sys);
	return list;
}

PyDoc_STRVAR(resolve_doc,
	     "resolve(value=None, order=None)\n--\n\n"
	     "What CUDA makes of a CUDA_VISIBLE_DEVICES value (None: the environment's; use\n"
	     "resolve('') for an empty one) in an order ('pci' or 'fastest'; None: the\n"
	     "environment's CUDA_DEVICE_ORDER), as `visdev map --json`: an object with value,\n"
	     "order, devices (cuda:N is devices[N]), stop, duplicate and warnings.");

static PyObject *resolve(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "value", "order", NULL };
	const char *value = NULL, *order_text = NULL;
	enum vd_order order = VD_ORDER_FASTEST;
	struct vd_resolution *res = NULL;
	struct vd_system *sys = NULL;
	PyObject *o = NULL, *devs = NULL, *warns = NULL, *value_obj = Py_None, *order_obj = Py_None;
	int err;

	(void)self;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO", names, &value_obj, &order_obj) ||
	    text_arg(&value, value_obj, "value") || text_arg(&order_text, order_obj, "order"))
		return NULL;
	if (!value)
		value = getenv("CUDA_VISIBLE_DEVICES");
	if (order_text && strcmp(order_text, "pci") && strcmp(order_text, "fastest")) {
		PyErr_Format(ArgumentError, "order is 'pci' or 'fastest', not '%s'", order_text);
		return NULL;
	}
	if (order_text)
		order = !strcmp(order_text, "pci") ? VD_ORDER_PCI : VD_ORDER_FASTEST;
	else
		vd_order_parse(&order, getenv("CUDA_DEVICE_ORDER"));
	if (snapshot(&sys))
		return NULL;
	err = vd_visible_resolve(&res, sys, value, order);
	if (err) {
		vd_system_free(sys);
		return raise_library(err);
	}
	o = PyDict_New();
	devs = PyList_New(0);
	warns = PyList_New(0);
	for (size_t i = 0; devs && i < res->ndevices; i++) {
		PyObject *d = device_dict(sys, res->devices[i]);

		if (!d || put(d, "cuda", PyLong_FromSize_t(i))) {
			Py_XDECREF(d);
			Py_CLEAR(devs);
		} else if (append(devs, namespace(d))) {
			Py_CLEAR(devs);
		}
	}
	for (size_t i = 0; warns && i < res->nwarnings; i++) {
		PyObject *s = PyUnicode_FromString(res->warnings[i]);

		if (!s || PyList_Append(warns, s))
			Py_CLEAR(warns);
		Py_XDECREF(s);
	}
	if (!o || !devs || !warns ||
	    put(o, "value", value ? PyUnicode_FromString(value) : (Py_INCREF(Py_None), Py_None)) ||
	    put(o, "order", PyUnicode_FromString(vd_order_name(res->order))) ||
	    put(o, "devices", (Py_INCREF(devs), devs)) ||
	    put(o, "stop",
		res->stop ? PyUnicode_FromString(vd_stop_reason_name(res->stop)) :
			    (Py_INCREF(Py_None), Py_None)) ||
	    put(o, "duplicate", PyBool_FromLong(res->duplicate)) ||
	    put(o, "warnings", (Py_INCREF(warns), warns)))
		Py_CLEAR(o);
	Py_XDECREF(devs);
	Py_XDECREF(warns);
	vd_resolution_free(res);
	vd_system_free(sys);
	return namespace(o);
}

PyDoc_STRVAR(leases_doc,
	     "leases()\n--\n\n"
	     "The live leases of the lease directory (VISDEV_LEASE_DIR), as `visdev "
	     "leases --json`:\nobjects with uuid, user, uid, pid, pgid, command, since "
	     "(ISO 8601, with its offset),\nmode ('exclusive' or 'shared') and mem_mib.");

static PyObject *leases(PyObject *self, PyObject *unused)
{
	struct vd_leases *l = NULL;
	PyObject *list;
	int err;

	(void)self;
	(void)unused;
	err = vd_leases_read(&l, vd_lease_dir(), NULL);
	if (err)
		return raise_library(err);
	list = PyList_New(0);
	for (size_t i = 0; list && i < l->n; i++) {
		PyObject *d = lease_dict(&l->holders[i]);

		if (!d || put(d, "uuid", PyUnicode_FromString(l->holders[i].uuid))) {
			Py_XDECREF(d);
			Py_CLEAR(list);
		} else if (append(list, namespace(d))) {
			Py_CLEAR(list);
		}
	}
	vd_leases_free(l);
	return list;
}

/* ---- backends -------------------------------------------------------------- */

static PyObject *use_demo(PyObject *self, PyObject *unused)
{
	(void)self;
	(void)unused;
	use_demo_flag = 1;
	free(fixture_path);
	fixture_path = NULL;
	Py_RETURN_NONE;
}

static PyObject *use_fixture(PyObject *self, PyObject *arg)
{
	PyObject *bytes = NULL;
	const char *path;
	FILE *f;

	(void)self;
	/* a str or a path-like object, as open() takes */
	if (!PyUnicode_FSConverter(arg, &bytes)) {
		PyErr_Clear();
		PyErr_SetString(ArgumentError,
				"use_fixture takes a path: a str or a path-like object");
		return NULL;
	}
	path = PyBytes_AsString(bytes);
	f = fopen(path, "re");
	if (!f) {
		PyErr_Format(Error, "cannot read fixture '%s': %s", path, strerror(errno));
		Py_DECREF(bytes);
		return NULL;
	}
	fclose(f);
	free(fixture_path);
	fixture_path = strdup(path);
	Py_DECREF(bytes);
	use_demo_flag = 0;
	if (!fixture_path)
		return PyErr_NoMemory();
	Py_RETURN_NONE;
}

/* The helper program's body (vd_cuda_set_helper): asks the driver, writes the answer, exits. */
static PyObject *cuda_helper(PyObject *self, PyObject *args)
{
	const char *lib, *value, *order;

	(void)self;
	if (!PyArg_ParseTuple(args, "sss", &lib, &value, &order))
		return NULL;
	vd_cuda_helper_main(lib, value, order);
}

/*
 * The CUDA driver is asked in a helper process that this python starts
 * afresh, not in a forked copy of a process that may have threads.
 */
static int name_helper(void)
{
	static int named;
	PyObject *modules = PyImport_GetModuleDict(), *mod, *file = NULL, *dir = NULL, *code = NULL;
	PyObject *exe = PySys_GetObject("executable"); /* borrowed */
	const char *path = exe && PyUnicode_Check(exe) ? PyUnicode_AsUTF8(exe) : NULL;
	int err = 0;

	if (named++ || !path || !*path)
		return 0; /* embedded, no python to start: the library forks as it would */
	/* the folder the visdev package is in, whatever put it on sys.path */
	mod = modules ? PyDict_GetItemString(modules, "visdev._visdev") : NULL;
	file = mod ? PyObject_GetAttrString(mod, "__file__") : NULL;
	if (file && PyUnicode_Check(file)) {
		PyObject *os = PyImport_ImportModule("os.path");

		dir = os ? PyObject_CallMethod(os, "dirname", "O", file) : NULL;
		Py_XSETREF(dir, dir ? PyObject_CallMethod(os, "dirname", "O", dir) : NULL);
		Py_XDECREF(os);
	}
	PyErr_Clear();
	code = PyUnicode_FromFormat("import sys; sys.path.insert(0, %R); from visdev._visdev "
				    "import _cuda_helper; _cuda_helper(*sys.argv[1:])",
				    dir ? dir : Py_None);
	if (code && PyUnicode_AsUTF8(code)) {
		const char *argv[] = { path, "-c", PyUnicode_AsUTF8(code), NULL };

		err = vd_cuda_set_helper(argv);
	}
	PyErr_Clear();
	Py_XDECREF(code);
	Py_XDECREF(dir);
	Py_XDECREF(file);
	return err;
}

static PyMethodDef methods[] = {
	{ "acquire", (PyCFunction)(void (*)(void))acquire, METH_VARARGS | METH_KEYWORDS,
	  acquire_doc },
	{ "devices", devices, METH_NOARGS, devices_doc },
	{ "resolve", (PyCFunction)(void (*)(void))resolve, METH_VARARGS | METH_KEYWORDS,
	  resolve_doc },
	{ "leases", leases, METH_NOARGS, leases_doc },
	{ "use_demo", use_demo, METH_NOARGS,
	  "use_demo()\n--\n\nRead the built-in demo server (four GPUs) from now on." },
	{ "_cuda_helper", cuda_helper, METH_VARARGS, NULL },
	{ "use_fixture", use_fixture, METH_O,
	  "use_fixture(path)\n--\n\nRead a simulated server from a fixture file from now on." },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef module = {
	PyModuleDef_HEAD_INIT,
	.m_name = "visdev._visdev",
	.m_doc = "visdev: choose and lease GPUs from inside a script, before `import torch`.\n\n"
		 "    import visdev\n"
		 "    lease = visdev.acquire(n=2, min_free='20G', or_cpu=True)\n"
		 "    import torch\n",
	.m_size = -1,
	.m_methods = methods,
};

PyMODINIT_FUNC PyInit__visdev(void)
{
	PyObject *m = PyModule_Create(&module);

	if (!m)
		return NULL;
	if (PyType_Ready(&LeaseType) < 0) {
		Py_DECREF(m);
		return NULL;
	}

	Error = PyErr_NewExceptionWithDoc("visdev.Error", "Every error of visdev's.", NULL, NULL);
	NoFitError = PyErr_NewExceptionWithDoc(
		"visdev.NoFitError", "No GPU fits the request; .reasons says why, per GPU.", Error,
		NULL);
	TooLateError = PyErr_NewExceptionWithDoc(
		"visdev.TooLateError",
		"CUDA has already started in this process: CUDA_VISIBLE_DEVICES would do nothing.",
		Error, NULL);
	{
		PyObject *bases = Error ? PyTuple_Pack(2, Error, PyExc_ValueError) : NULL;

		ArgumentError =
			bases ? PyErr_NewExceptionWithDoc(
					"visdev.ArgumentError",
					"A bad argument: a size without its unit, an unknown policy, "
					"... (a ValueError too).",
					bases, NULL) :
				NULL;
		Py_XDECREF(bases);
	}
	if (!Error || !NoFitError || !TooLateError || !ArgumentError ||
	    PyModule_AddObjectRef(m, "ArgumentError", ArgumentError) ||
	    PyModule_AddObjectRef(m, "Error", Error) ||
	    PyModule_AddObjectRef(m, "NoFitError", NoFitError) ||
	    PyModule_AddObjectRef(m, "TooLateError", TooLateError) ||
	    PyModule_AddObjectRef(m, "Lease", (PyObject *)&LeaseType) ||
	    PyModule_AddStringConstant(m, "__version__", VD_VERSION)) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
