/*
 * visdev.h - the public API of libvisdev.
 *
 * libvisdev decides which NVIDIA GPUs a program sees. It reads the facts
 * about a machine's GPUs from a backend (NVML loaded at run time, or a
 * simulated server described in JSON), applies CUDA's rules for
 * CUDA_VISIBLE_DEVICES to them, and writes values that resolve to exactly
 * the devices chosen.
 *
 * Conventions, the same for every function:
 * - Functions that can fail return 0 or a negative enum vd_error and leave a
 *   one-line message for vd_error_last(). The library never prints, never
 *   exits and never aborts on bad input.
 * - Out-parameters come first and are named out. On failure *out is NULL.
 * - Objects returned through out belong to the caller, who frees them with
 *   the matching _free function. Every _free accepts NULL and does nothing.
 * - Snapshots (struct vd_system) and resolutions (struct vd_resolution) are
 *   plain data: read them freely, do not modify or free their members.
 * - Sizes are in MiB unless a name says otherwise.
 */
#ifndef VISDEV_H
#define VISDEV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
# define VD_API __attribute__((visibility("default")))
#else
# define VD_API
#endif

#define VD_VERSION "0.1.0"

/* Errors: 0 is success, every failure is one of these, negative. */
enum vd_error {
	VD_OK = 0,
	VD_EINVAL = -1,	   /* a malformed argument or value */
	VD_ENOMEM = -2,	   /* out of memory */
	VD_ENOTFOUND = -3, /* no such file, device or entry */
	VD_EIO = -4,	   /* reading or writing failed */
	VD_EPARSE = -5,	   /* a malformed fixture */
	VD_ENODRIVER = -6, /* the NVML library could not be loaded */
	VD_ENVML = -7,	   /* NVML answered with an error */
	VD_EBUSY = -8,	   /* held by someone else */
	VD_EPERM = -9,	   /* refused: permissions or an unsafe file */
	VD_ECUDA = -10,	   /* the CUDA driver could not be asked */
	VD_ENOFIT = -11,   /* no GPU fits the request (the choice says why) */
	VD_EINTR = -12,	   /* a wait was interrupted by a signal */
};

/*
 * The message of the last failure in this thread: one line, lower case, no
 * full stop. Never NULL; valid until the next libvisdev call in this thread.
 */
VD_API const char *vd_error_last(void);

/* A short name for an error code ("EINVAL", ...). Never NULL. */
VD_API const char *vd_error_name(int code);

/* The library's version string, VD_VERSION at build time. */
VD_API const char *vd_version(void);

/* ---- The device model ------------------------------------------------ */

#define VD_UUID_MAX	96
#define VD_NAME_MAX	96
#define VD_BUSID_MAX	32
#define VD_PROCNAME_MAX 64
#define VD_PROFILE_MAX	32
#define VD_DRIVER_MAX	32
#define VD_COMMAND_MAX	256

/* Which of a GPU's (or MIG instance's) measurements are known. */
enum vd_gpu_fields {
	VD_GPU_MEMORY = 1 << 0,	     /* memory_total_mib and memory_used_mib */
	VD_GPU_UTILIZATION = 1 << 1, /* utilization_gpu */
	VD_GPU_TEMPERATURE = 1 << 2, /* temperature_c */
	VD_GPU_POWER = 1 << 3,	     /* power_mw */
	VD_GPU_NUMA = 1 << 4,	     /* numa_node */
	VD_GPU_CUDA_RANK = 1 << 5,   /* cuda_rank */
	VD_GPU_PROCESSES = 1 << 6,   /* processes: the list is known (maybe empty) */
};

/* A process using a GPU. */
struct vd_process {
	uint32_t pid;
	int used_known; /* used_mib is known */
	uint64_t used_mib;
	char name[VD_PROCNAME_MAX]; /* "" when unknown */
	char user[32];		    /* its owner: "alice", "uid 1234" without a name; "" unknown */
};

/* A MIG instance of a GPU in MIG mode. */
struct vd_mig {
	char uuid[VD_UUID_MAX];	      /* "MIG-..." */
	unsigned gi;		      /* GPU instance id */
	unsigned ci;		      /* compute instance id */
	char profile[VD_PROFILE_MAX]; /* "3g.40gb", "" when unknown */
	unsigned fields;	      /* VD_GPU_MEMORY */
	uint64_t memory_total_mib;
	uint64_t memory_used_mib;
};

/* A physical GPU. Fields not named in `fields` are unknown, not zero. */
struct vd_gpu {
	unsigned index;		       /* position in PCI bus order, as nvidia-smi */
	char uuid[VD_UUID_MAX];	       /* "GPU-..." */
	char name[VD_NAME_MAX];	       /* "NVIDIA H100 80GB HBM3" */
	char pci_bus_id[VD_BUSID_MAX]; /* "00000000:18:00.0" */
	int lost;		       /* fell off the bus: never to be chosen */
	unsigned fields;	       /* enum vd_gpu_fields */
	uint64_t memory_total_mib;
	uint64_t memory_used_mib;
	unsigned utilization_gpu; /* percent */
	int temperature_c;
	unsigned power_mw; /* milliwatts */
	int numa_node;
	unsigned cuda_rank; /* place in CUDA's fastest-first order */
	struct vd_process *processes;
	size_t nprocesses;
	int mig_mode; /* MIG mode is enabled */
	struct vd_mig *mig;
	size_t nmig;
};

/* How near two GPUs are, nearest first. */
enum vd_link_level {
	VD_LINK_NVLINK = 0,
	VD_LINK_PIX,  /* same PCIe switch */
	VD_LINK_PXB,  /* several PCIe switches */
	VD_LINK_PHB,  /* same host bridge */
	VD_LINK_NODE, /* same NUMA node */
	VD_LINK_SYS,  /* across sockets */
};

/* "nvlink", "pix", ...; NULL for a value out of range. */
VD_API const char *vd_link_level_name(enum vd_link_level level);

struct vd_link {
	unsigned a, b; /* GPU indices, a < b */
	enum vd_link_level level;
};

/* What one backend saw of the machine at one moment. */
struct vd_system {
	char driver_version[VD_DRIVER_MAX]; /* "" when unknown */
	int cuda_driver_version;	    /* 12040 for 12.4; -1 when unknown */
	struct vd_gpu *gpus;		    /* in PCI bus order: gpus[i].index == i */
	size_t ngpus;
	struct vd_link *links;
	size_t nlinks;
};

/* Frees a snapshot and everything it points to. */
VD_API void vd_system_free(struct vd_system *sys);

/* Memory that is neither used nor reserved, or -1 when unknown. */
VD_API int64_t vd_gpu_memory_free_mib(const struct vd_gpu *gpu);

/*
 * Whether every GPU of the snapshot carries a cuda_rank, so that CUDA's
 * fastest-first order is known.
 */
VD_API int vd_system_fastest_known(const struct vd_system *sys);

/* ---- Backends: where the facts come from ------------------------------ */

struct vd_backend;

struct vd_backend_options {
	int demo;	      /* the built-in demo server */
	const char *fixture;  /* a simulated server from this JSON file */
	const char *nvml_lib; /* load this libnvidia-ml instead of the system's */
	int use_env;	      /* unset choices fall back to VISDEV_FIXTURE, VISDEV_NVML_LIB */
};

/*
 * Opens the backend the options name: the demo server, a fixture, or NVML
 * (the default). Errors: VD_EINVAL when both demo and a fixture are asked,
 * VD_ENOTFOUND/VD_EIO/VD_EPARSE for a fixture that cannot be read or is
 * malformed (the message names file, line and column), VD_ENODRIVER when
 * libnvidia-ml cannot be loaded (the message names the library tried),
 * VD_ENVML when NVML fails to initialise. Free with vd_backend_free().
 */
VD_API int vd_backend_open(struct vd_backend **out, const struct vd_backend_options *opts);

/*
 * Reads the machine's state now. A GPU that fell off the bus is returned
 * with lost set and the others as usual. May be called many times on one
 * backend. Free the snapshot with vd_system_free().
 */
VD_API int vd_backend_snapshot(struct vd_system **out, struct vd_backend *backend);

/* "nvml", "fixture" or "demo". */
VD_API const char *vd_backend_name(const struct vd_backend *backend);

/* The library or file the backend reads from ("(built in)" for the demo). */
VD_API const char *vd_backend_source(const struct vd_backend *backend);

VD_API void vd_backend_free(struct vd_backend *backend);

/* ---- CUDA_VISIBLE_DEVICES: the engine --------------------------------- */

/* CUDA's enumeration order, chosen by CUDA_DEVICE_ORDER. */
enum vd_order {
	VD_ORDER_FASTEST = 0, /* unset or FASTEST_FIRST: CUDA's default */
	VD_ORDER_PCI = 1,     /* PCI_BUS_ID: the order of nvidia-smi and NVML */
};

/*
 * Reads a CUDA_DEVICE_ORDER value (NULL when unset) into *out. Returns 0,
 * or VD_EINVAL for a value CUDA does not know (*out is then the default,
 * VD_ORDER_FASTEST, which is what CUDA uses; the message says so).
 */
VD_API int vd_order_parse(enum vd_order *out, const char *value);

/* "pci" or "fastest". */
VD_API const char *vd_order_name(enum vd_order order);

/* Why a list of devices stopped before its end. */
enum vd_stop_reason {
	VD_STOP_NONE = 0,
	VD_STOP_EMPTY,	      /* an empty element ("0,,1", "0,1,") */
	VD_STOP_NOT_A_NUMBER, /* no digits where an ordinal was expected */
	VD_STOP_NEGATIVE,     /* a negative ordinal */
	VD_STOP_OUT_OF_RANGE, /* an ordinal not below the device count */
	VD_STOP_NOT_UUID,     /* in a UUID list, an element without GPU- or MIG- */
	VD_STOP_NO_MATCH,     /* a UUID (prefix) that names no device */
	VD_STOP_AMBIGUOUS,    /* a UUID prefix that names several devices */
};

/* "empty", "not-a-number", ... (the JSON names); NULL for VD_STOP_NONE. */
VD_API const char *vd_stop_reason_name(enum vd_stop_reason reason);

/* One device CUDA will see: a whole GPU, or one MIG instance of it. */
struct vd_device_ref {
	unsigned gpu; /* index into vd_system.gpus */
	int mig;      /* index into that GPU's mig, or -1 for the whole GPU */
};

/*
 * The device whose UUID is uuid (a GPU's, or a MIG device's) into *out.
 * Returns 0, or VD_ENOTFOUND when the snapshot has no such device.
 */
VD_API int vd_system_find(struct vd_device_ref *out, const struct vd_system *sys, const char *uuid);

/*
 * The free memory of a device of sys: a whole GPU's (vd_gpu_memory_free_mib),
 * or a MIG instance's own, never its parent's; -1 when unknown.
 */
VD_API int64_t vd_device_memory_free_mib(const struct vd_system *sys, struct vd_device_ref d);

/*
 * Why CUDA does not enumerate a device that a value names (or, with the
 * variable unset, that the machine has). A GPU in MIG mode is, to CUDA, its
 * MIG devices: naming it (by ordinal or GPU- UUID) names them, in the order
 * the driver lists them. Which of them CUDA then enumerates depends on the
 * driver (NVIDIA's MIG User Guide, "CUDA Device Enumeration").
 */
enum vd_drop_reason {
	VD_DROP_NONE = 0,
	VD_DROP_MIG_EMPTY,  /* a GPU in MIG mode without MIG devices: nothing of it to use */
	VD_DROP_ONE_MIG,    /* before R570: a MIG device after the first one */
	VD_DROP_BESIDE_MIG, /* before R570: a whole GPU, once a MIG device is enumerated */
	VD_DROP_SAME_GI,    /* from R570: a second compute instance of one GPU instance */
};

/* "mig-empty", "one-mig", "beside-mig", "same-gpu-instance"; NULL for VD_DROP_NONE. */
VD_API const char *vd_drop_reason_name(enum vd_drop_reason reason);

/* The position of a device no element names (the variable is unset). */
#define VD_NO_POSITION ((size_t)-1)

/* A device named (or, unset, present) that CUDA does not enumerate. */
struct vd_dropped {
	struct vd_device_ref device;
	enum vd_drop_reason reason;
	size_t position; /* the 0-based element naming it, or VD_NO_POSITION */
};

/* What CUDA makes of a value of CUDA_VISIBLE_DEVICES on a machine. */
struct vd_resolution {
	int set;		       /* the variable is set (possibly empty) */
	enum vd_order order;	       /* the order ordinals were counted in */
	int order_assumed;	       /* fastest-first was asked but is unknown:
					  PCI bus order was used, and said */
	int uuid_form;		       /* the value is a list of GPU-/MIG- ids */
	struct vd_device_ref *devices; /* devices[n] is cuda:n: what CUDA enumerates */
	size_t ndevices;
	struct vd_dropped *dropped; /* named (or present) but not enumerated, in order */
	size_t ndropped;
	size_t nelements;	   /* elements in the value, all of them */
	enum vd_stop_reason stop;  /* why the list ended early, or NONE */
	size_t stop_position;	   /* 0-based element where it stopped */
	char *stop_token;	   /* that element as written */
	int duplicate;		   /* a device named twice: nothing is visible */
	size_t duplicate_position; /* the element naming it the second time */
	size_t duplicate_first;	   /* the element naming it the first time */
	char **warnings;	   /* one-line notes, plain words */
	size_t nwarnings;
};

/*
 * Applies CUDA's rules for CUDA_VISIBLE_DEVICES to value (NULL: the variable
 * is unset) on the machine sys, counting ordinals in order. Lost GPUs still
 * count: CUDA numbers them too. The devices named are then those CUDA
 * enumerates (devices) and those it does not (dropped, with the reason):
 * a GPU in MIG mode stands for its MIG devices; before driver R570 (or with
 * the driver unknown) a process enumerates one MIG device in all and no
 * whole GPU beside it, from R570 one compute instance per GPU instance. A
 * value that makes nothing visible is not an error: the resolution says
 * why. Errors: VD_ENOMEM only.
 */
VD_API int vd_visible_resolve(struct vd_resolution **out, const struct vd_system *sys,
			      const char *value, enum vd_order order);

VD_API void vd_resolution_free(struct vd_resolution *res);

/* The N of cuda:N that device d is under res, or -1 when CUDA does not enumerate it. */
VD_API int vd_resolution_cuda(const struct vd_resolution *res, struct vd_device_ref d);

/* Where res drops device d (named but not enumerated), or NULL when it does not. */
VD_API const struct vd_dropped *vd_resolution_dropped(const struct vd_resolution *res,
						      struct vd_device_ref d);

/* Which form vd_visible_format() writes. */
enum vd_format {
	VD_FORMAT_INDEX = 0, /* PCI bus indices, for CUDA_DEVICE_ORDER=PCI_BUS_ID */
	VD_FORMAT_UUID = 1,  /* full GPU-/MIG- UUIDs, whatever the order */
};

/*
 * Writes a value of CUDA_VISIBLE_DEVICES that resolves, under CUDA's rules,
 * to exactly devs in that order (index form: with CUDA_DEVICE_ORDER set to
 * PCI_BUS_ID). The empty set is "". Errors: VD_EINVAL for a device not in
 * sys, a device named twice, a MIG instance asked in index form (MIG
 * devices have no index), a GPU in MIG mode asked whole, or devices CUDA
 * would not enumerate together (see vd_drop_reason): a value of which CUDA
 * would silently drop a part is never written. The string is the caller's
 * to free().
 */
VD_API int vd_visible_format(char **out, const struct vd_system *sys,
			     const struct vd_device_ref *devs, size_t ndevs, enum vd_format format);

/*
 * The value of CUDA_VISIBLE_DEVICES for a child that must see exactly devs,
 * as `visdev run` writes it: in format (-1: the safest, UUIDs under a
 * parent restriction (parent set) or for MIG devices, else indices, to go
 * with CUDA_DEVICE_ORDER=PCI_BUS_ID), checked to resolve back to exactly
 * devs. Errors: as vd_visible_format(), VD_ENOMEM.
 */
VD_API int vd_child_value(char **out, const struct vd_system *sys,
			  const struct vd_resolution *parent, const struct vd_device_ref *devs,
			  size_t n, int format);

/* What the NVIDIA container runtime does with NVIDIA_VISIBLE_DEVICES. */
enum vd_container_mode {
	VD_CONTAINER_UNSET = 0, /* not set: no GPU support, except in a legacy CUDA image
				   (CUDA_VERSION without NVIDIA_REQUIRE_CUDA), which gets all */
	VD_CONTAINER_ALL,	/* "all": every GPU */
	VD_CONTAINER_NONE,	/* "none": no GPU, but the driver is mounted */
	VD_CONTAINER_VOID,	/* "void", or no element at all: no GPU support */
	VD_CONTAINER_LIST,	/* indices, UUIDs, PCI bus ids, <gpu>:<mig> */
};

struct vd_container_view {
	enum vd_container_mode mode;
	struct vd_device_ref *devices; /* with LIST and ALL: each device once, in the
					  order named (ALL: MIG devices for GPUs in MIG mode) */
	size_t ndevices;
	int refused;	 /* an element names no device: the runtime does not start the container */
	char **warnings; /* the element that names nothing, one that decides the whole value */
	size_t nwarnings;
};

/*
 * Explains a value of NVIDIA_VISIBLE_DEVICES (NULL: unset) on sys as the
 * NVIDIA container runtime reads it: elements trimmed, empty ones dropped;
 * "void" anywhere, or no element, is VOID; else the first element that is
 * "all" or "none" decides; else "all" in any case is ALL; else a LIST of
 * full GPU-/MIG- UUIDs (case ignored), PCI bus ids ("0000:18:00.0"),
 * indices read with strtoumax ("+1" is 1) and "<gpu>:<mig>", duplicates
 * dropped, the first element that names no device refusing the container.
 * Errors: VD_ENOMEM only.
 */
VD_API int vd_container_resolve(struct vd_container_view **out, const struct vd_system *sys,
				const char *value);

VD_API void vd_container_view_free(struct vd_container_view *view);

/*
 * Looks through an environment (as environ: "NAME=value" strings, NULL at
 * the end) for the mistakes that make CUDA_VISIBLE_DEVICES "do nothing":
 * misspelt or lower-case names, stray quotes or blanks in the value. Each
 * finding is one line in *out (NULL-terminated array, *nout entries); free
 * with vd_strings_free(). Errors: VD_ENOMEM only.
 */
VD_API int vd_env_check(char ***out, size_t *nout, char *const *env);

/*
 * Asks the CUDA driver itself which devices it enumerates when
 * CUDA_VISIBLE_DEVICES is value (NULL: unset) and CUDA_DEVICE_ORDER is
 * order. The driver (cuda_lib; when NULL, the environment's VISDEV_CUDA_LIB,
 * else "libcuda.so.1") is loaded in a child process, so this process's CUDA
 * state is untouched; a driver that does not answer within 20 s is killed.
 * *out holds the UUIDs ("GPU-..." or "MIG-...") in CUDA's order, *nout of
 * them (none when the driver sees no device, which is no error); free with
 * vd_strings_free(). Errors: VD_ECUDA when the driver cannot be loaded or
 * fails (the message says which call and what it answered), VD_ENOMEM.
 */
VD_API int vd_cuda_enumerate(char ***out, size_t *nout, const char *cuda_lib, const char *value,
			     enum vd_order order);

/*
 * A caller with threads may not run the driver in a forked copy of itself
 * (a lock another thread held at the fork would hang it): it names a helper
 * program instead, argv (NULL-terminated; NULL: none, the default), which
 * vd_cuda_enumerate() then runs with three more arguments (the driver
 * library, "=VALUE" or "unset", and "pci" or "fastest") and whose standard
 * output it reads. The helper's main calls vd_cuda_helper_main() with those
 * three, which never returns. Errors: VD_ENOMEM.
 */
VD_API int vd_cuda_set_helper(const char *const *argv);
VD_API __attribute__((noreturn)) void vd_cuda_helper_main(const char *lib, const char *value,
							  const char *order);

/* ---- Sizes ---------------------------------------------------------- */

/*
 * Reads a memory size given by a user into MiB: "8G", "8GiB", "8192M",
 * "8192MiB", "1.5G", "1T": a bare number is refused, with the forms it
 * may have meant. Errors: VD_EINVAL for anything else (empty, junk after
 * the unit, negative, too large), with a message quoting the text.
 */
VD_API int vd_parse_size_mib(uint64_t *out, const char *text);

/* ---- Words ---------------------------------------------------------- */

/*
 * Which of words[0..n) a mistyped word most likely meant: the nearest by
 * edit distance, when it is at most two edits and at most half the word's
 * length away ("jsno" for "json", "lsit" for "list"); else the one word it
 * begins ("fix" for "fixture"). Returns that word's index, or -1 when no
 * word is near enough to suggest.
 */
VD_API long vd_nearest_word(const char *word, const char *const *words, size_t n);

/* ---- Leases: who holds which GPU (lease.c) ------------------------------ */

enum vd_lease_mode {
	VD_LEASE_EXCLUSIVE = 0, /* the whole device, for one job */
	VD_LEASE_SHARED = 1,	/* a share of its memory, declared in mem_mib */
	VD_LEASE_HELD = 2,	/* not a lease: held for a request waiting in line
				   (vd_line_holds), which no later request may take */
};

/* One live lease on one device, as its holder recorded it. */
struct vd_lease_holder {
	char uuid[VD_UUID_MAX]; /* the device: a GPU- or MIG- UUID */
	enum vd_lease_mode mode;
	uint64_t mem_mib;	 /* shared: the memory reserved */
	uint64_t mem_unused_mib; /* shared: reserved but not yet allocated by the job,
				    as far as the snapshot given to vd_leases_read shows */
	uint32_t uid;
	char user[32];
	int32_t pid;		      /* the job's first process */
	int32_t pgid;		      /* the job's process group */
	char command[VD_COMMAND_MAX]; /* the job's command line, cut to fit */
	int64_t since;		      /* when the lease was taken, seconds since the epoch */
	char journal[VD_COMMAND_MAX]; /* a queue's job: the queue's journal; "" for none */
	int64_t job;		      /* and the job's number in it */
};

struct vd_leases {
	struct vd_lease_holder *holders;
	size_t n;
};

/*
 * The lease directory: VISDEV_LEASE_DIR when set, else the system-wide
 * default shared by every user of the machine, VD_LEASE_DIR_DEFAULT.
 */
#define VD_LEASE_DIR_DEFAULT "/dev/shm/visdev-leases"
VD_API const char *vd_lease_dir(void);

/*
 * The owner (uid) of the lease directory dir, so that a caller can warn
 * when an ordinary user other than itself owns it: a directory's owner may
 * remove anyone's files in it, sticky bit or not, and with them the leases.
 * Errors: VD_ENOTFOUND when dir does not exist (yet), VD_EIO.
 */
VD_API int vd_lease_dir_owner(uint32_t *out, const char *dir);

/*
 * Reads the live leases in dir (created, shared by all users, if missing).
 * sys, when not NULL, is used to tell how much of each shared reservation
 * the job has not yet allocated. A directory that others could tamper with
 * (a symbolic link, or writable by others without the sticky bit) is
 * refused with VD_EPERM, and so is a relative path (jobs started from other
 * folders would not see each other's leases). The holders come
 * sorted by device (in sys's order when given, else by UUID), then oldest
 * first. Free with vd_leases_free().
 */
VD_API int vd_leases_read(struct vd_leases **out, const char *dir, const struct vd_system *sys);
VD_API void vd_leases_free(struct vd_leases *leases);

/*
 * How many records in the lease directory dir belong to leases that have
 * ended (nobody holds them): harmless, and tidied away by the next lease
 * taken there. Errors as vd_leases_read().
 */
VD_API int vd_lease_dir_stale(size_t *out, const char *dir);

/* A lease held by this process: the devices it took and the locks that hold them. */
struct vd_lease;
struct vd_choice;
struct vd_select_options;

/*
 * Chooses devices with vd_select() and leases them, atomically with respect
 * to every other visdev on the machine: choosing and locking happen under
 * one allocation lock in dir, so two callers never both take a device they
 * both saw free. opts->mem_mib == 0 takes exclusive leases; otherwise shared
 * ones, each counting the memory it declared. command is recorded for
 * others to see (who holds what). Returns 0 and *out, or VD_ENOFIT with
 * *choice's reasons (and *out NULL); *choice, when not NULL, is the
 * caller's to free either way. Errors: VD_EPERM for an unsafe lease
 * directory or lock file (a symlink, a relative path), VD_EBUSY when the
 * devices chosen kept being taken by others (try again), VD_EIO, VD_ENOMEM.
 *
 * The lease lasts while any process holds its lock descriptors: this
 * process, and any child that inherited them (see vd_lease_inherit). It
 * survives the caller's death as long as a child lives, and needs no
 * cleaning after a crash.
 */
VD_API int vd_lease_acquire(struct vd_lease **out, struct vd_choice **choice, const char *dir,
			    const struct vd_system *sys, const struct vd_resolution *parent,
			    const struct vd_select_options *opts, const char *command);

/* The devices leased, best first; *n of them. Valid while the lease is. */
VD_API const struct vd_device_ref *vd_lease_devices(const struct vd_lease *lease, size_t *n);

/*
 * What others read of the lease: its holder record, as vd_leases_read()
 * gives it, with uuid the first device's (all zeros if out of memory).
 */
VD_API void vd_lease_holder(const struct vd_lease *lease, struct vd_lease_holder *out);

/*
 * Records which process (and process group) the job is, once it has been
 * started, so that others see its pid and its memory use is counted
 * against its reservation. Errors: VD_EIO.
 */
VD_API int vd_lease_set_job(struct vd_lease *lease, int32_t pid, int32_t pgid);

/*
 * Names in the lease's record the queue whose job holds it: the queue's
 * journal (an absolute path) and the job's number, so that `visdev top` and
 * `leases --json` can tell which queue, and how far it is. Errors: VD_EINVAL
 * for a path of VD_COMMAND_MAX bytes or more (not recorded), VD_ENOMEM,
 * VD_EIO.
 */
VD_API int vd_lease_set_queue(struct vd_lease *lease, const char *journal, size_t job);

/*
 * Passes the lease on to another job of the same caller, once the one that
 * held it has ended and no process of it lives on: its record names command,
 * from now (vd_lease_set_job() follows once the job has started). The
 * devices stay leased throughout, so nobody can take them in between; a
 * caller that passes a lease on should make sure that nobody waits in line
 * for them (vd_line_read()). Errors: VD_EIO, VD_ENOMEM.
 */
VD_API int vd_lease_pass(struct vd_lease *lease, const char *command);

/*
 * Makes the lease's descriptors survive exec, so that a program run from
 * this process holds the lease for as long as it (or a child of it) lives.
 * Only fcntl(): safe in a child between fork and exec. Returns 0 or -1.
 */
VD_API int vd_lease_inherit(const struct vd_lease *lease);

/*
 * Lets go of this process's hold on the lease and frees it; the lease ends
 * when no other process (an inheriting child) still holds it, and its
 * record is removed when it has. NULL does nothing.
 */
VD_API void vd_lease_free(struct vd_lease *lease);

/* ---- Selection: which devices fit (select.c, pure) --------------------- */

enum vd_policy {
	VD_POLICY_MOST_FREE = 0, /* the most free memory first (the default) */
	VD_POLICY_LEAST_USED,	 /* the lowest utilisation first */
	VD_POLICY_PACK,		 /* the least free memory that still fits: fill GPUs up */
};

/* "most-free", "least-used", "pack"; and back (VD_EINVAL for another word). */
VD_API const char *vd_policy_name(enum vd_policy policy);
VD_API int vd_policy_parse(enum vd_policy *out, const char *name);

struct vd_select_options {
	unsigned n;		 /* devices wanted; 0 is taken as 1 */
	uint64_t min_free_mib;	 /* 0: no minimum */
	int max_util;		 /* percent; -1: no maximum */
	const char *model;	 /* shell pattern on the name, case ignored; NULL: any */
	const unsigned *exclude; /* physical GPU indices never to choose */
	size_t nexclude;
	enum vd_policy policy;
	uint64_t mem_mib;	   /* 0: exclusive lease; else a shared lease of this much */
	const char *const *within; /* UUIDs of the only devices to consider (a
				      request read from the line); NULL: no such limit */
	size_t nwithin;
};

/* The defaults: one device, no limits, most-free, exclusive. */
VD_API void vd_select_options_init(struct vd_select_options *opts);

/* The request as a whole, in place of a GPU index (struct vd_reason). */
#define VD_NO_GPU ((unsigned)-1)

/* What a reason line is about, for programs: the device and a stable code. */
struct vd_reason {
	struct vd_device_ref device; /* gpu VD_NO_GPU: the request as a whole */
	const char *code;	     /* "hidden", "leased", ... (docs/json.md); static */
};

struct vd_choice {
	struct vd_device_ref *devices; /* chosen, best first; ndevices == n on success */
	size_t ndevices;
	char **reasons;	       /* one line per device not chosen that could not be: "GPU 3:
				  leased by alice (pid 4242, python train.py) since
				  2026-12-06T10:02:00+01:00" */
	struct vd_reason *why; /* why[i]: what reasons[i] is about, and its code */
	size_t nreasons;
	int never;		/* with VD_ENOFIT: no end of a lease or change of load can make
				   it fit (too few devices of the model, too little memory in all),
				   so waiting is pointless */
	size_t unknown_holders; /* set by vd_lease_acquire: devices found locked
				   without a live record (a lease ending at that
				   moment, or a lock another program holds): worth
				   trying again soon, without waiting for an end */
	struct vd_device_ref *fitting; /* every device that fits on its own, in policy
					  order (so also with VD_ENOFIT: fewer than n, or
					  a set CUDA would not use at once) */
	size_t nfitting;
};

/*
 * Chooses opts->n devices on sys that fit opts, given the live leases and
 * the parent's restriction (the resolution of the CUDA_VISIBLE_DEVICES this
 * process was given; NULL or unset: every device is a candidate). Pure and
 * deterministic. Returns 0 with the choice, or VD_ENOFIT with the choice's
 * reasons filled (and no devices). Errors: VD_ENOMEM. Free with
 * vd_choice_free().
 */
VD_API int vd_select(struct vd_choice **out, const struct vd_system *sys,
		     const struct vd_leases *leases, const struct vd_resolution *parent,
		     const struct vd_select_options *opts);
VD_API void vd_choice_free(struct vd_choice *choice);

/*
 * The state of one device, as a person asking for a GPU sees it: what a new
 * request could have of it now. The same judgement as vd_select()'s.
 */
enum vd_state {
	VD_STATE_FREE = 0, /* no lease, nothing at work on it: any request may have it */
	VD_STATE_SHARED,   /* shared leases only: free_mib more may still be reserved */
	VD_STATE_LEASED,   /* an exclusive lease, or a lock whose holder is unknown */
	VD_STATE_HELD,	   /* held for a request waiting in line */
	VD_STATE_BUSY,	   /* no lease, but processes visdev did not start, or memory in
			      use that nothing explains: someone's job */
	VD_STATE_LOST,	   /* fell off the bus: never chosen */
	VD_STATE_MIG,	   /* a GPU in MIG mode, seen whole: its MIG devices have states */
};

/* "free", "shared", "leased", "held", "busy", "lost", "mig"; NULL out of range. */
VD_API const char *vd_state_name(enum vd_state state);

struct vd_device_status {
	enum vd_state state;
	int64_t free_mib;	 /* effective free memory: what NVML reports free less what
				    shared leases reserved and do not use yet; -1 unknown */
	size_t nleases;		 /* live leases (and holds) on the device */
	size_t nforeign;	 /* processes on it that no lease on it accounts for */
	int64_t unexplained_mib; /* with no lease: memory in use that no listed process
				    explains (busy beyond 1 GiB); else 0 */
	int64_t reservable_mib;	 /* what a shared (--mem) request could still reserve:
				    free_mib where one may go (free, shared, busy), 0 where
				    not; -1 unknown */
};

/*
 * The state of device d of sys given the live leases (which may include
 * vd_line_holds()'s holds). Pure. Errors: VD_EINVAL for a device not in sys.
 */
VD_API int vd_device_status(struct vd_device_status *out, const struct vd_system *sys,
			    const struct vd_leases *leases, struct vd_device_ref d);

/* ---- Waiting in line: first come, first served (line.c) --------------- */

/*
 * Requests that wait for devices stand in one line in the lease directory,
 * across users and processes, in the order they began to wait. The oldest
 * request that does not fit holds for itself the devices it could use as
 * they come free, up to the number it asked; a later request may take only
 * what no earlier one holds (backfill). A waiter that dies leaves the line
 * at once (its record is flock'ed, as a lease is), and a lease that ends
 * wakes the waiter that is next for it, not every waiter.
 */

/* One request waiting in line, as its record and the plan say. */
struct vd_waiting {
	unsigned place;	 /* 1 for the first in line */
	uint64_t ticket; /* the order of arrival: lower is earlier */
	uint32_t uid;	 /* the record file's owner */
	char user[32];
	int32_t pid;
	int64_t since; /* when it began to wait, seconds since the epoch */
	unsigned n;    /* what it asked */
	uint64_t mem_mib;
	uint64_t min_free_mib;
	int max_util; /* -1: no maximum */
	char model[64];
	enum vd_policy policy;
	char command[VD_COMMAND_MAX];
	char **within; /* UUIDs of the devices it may use at all; NULL: any */
	size_t nwithin;
	struct vd_device_ref *holds; /* held for it now (vd_line_plan), best first */
	size_t nholds;
	int ready; /* its holds are a whole choice: it starts when it next looks */
};

struct vd_line {
	struct vd_waiting *waiting; /* in order of arrival */
	size_t n;
	char **ignored; /* one line per file in the line that was not believed:
			   "wait.17.json (bob): not a line record" */
	size_t nignored;
};

/*
 * Reads the line in the lease directory dir: the live requests, first
 * first, and what was ignored. Errors as vd_leases_read(). Free with
 * vd_line_free().
 */
VD_API int vd_line_read(struct vd_line **out, const char *dir);

/*
 * Works out, on sys with the live leases, what each waiting request holds
 * (holds, nholds, ready). Pure. Errors: VD_ENOMEM.
 */
VD_API int vd_line_plan(struct vd_line *line, const struct vd_system *sys,
			const struct vd_leases *leases);

/*
 * Adds to leases one VD_LEASE_HELD holder per device held for a request in
 * the line planned on sys, so that vd_select() leaves them to it. Errors:
 * VD_ENOMEM.
 */
VD_API int vd_line_holds(struct vd_leases *leases, const struct vd_line *line,
			 const struct vd_system *sys);
VD_API void vd_line_free(struct vd_line *line);

/*
 * A request of this process that waits in line: vd_waiter_acquire() tries
 * as vd_lease_acquire() does, and the first try that does not fit (and
 * could some day) takes a place at the end of the line; each later try is
 * made from that place, and the one that succeeds leaves the line (and
 * watches nothing until the next try). vd_waiter_wait() sleeps until it
 * may be this request's turn. Free a waiter a while after its last try, as
 * `visdev run` does once its job has ended: freeing it at once waits for
 * the kernel to finish with its watches (milliseconds).
 */
struct vd_waiter;
VD_API int vd_waiter_new(struct vd_waiter **out, const char *dir);
VD_API int vd_waiter_acquire(struct vd_waiter *waiter, struct vd_lease **out,
			     struct vd_choice **choice, const struct vd_system *sys,
			     const struct vd_resolution *parent,
			     const struct vd_select_options *opts, const char *command);

/*
 * The request's place in line (1: first) and the line's length, as of the
 * last try; 0 when it is not in line.
 */
VD_API unsigned vd_waiter_place(const struct vd_waiter *waiter, unsigned *of);

/* The devices held for it as of the last try, best first; *n of them. */
VD_API const struct vd_device_ref *vd_waiter_holds(const struct vd_waiter *waiter, size_t *n);

/*
 * Waits up to timeout_ms (-1: for ever) until it may be the request's turn:
 * another waiter saw that it fits, the one before it left the line, or,
 * for the first in line, a lease ended. Returns 1 (try again), 0 on
 * time-out, VD_EINTR when a signal arrived, VD_EIO.
 */
VD_API int vd_waiter_wait(struct vd_waiter *waiter, int timeout_ms);

/* A descriptor to poll() for readability, for callers with event loops. */
VD_API int vd_waiter_fd(const struct vd_waiter *waiter);

/* Leaves the line, if in it, and frees the waiter. NULL does nothing. */
VD_API void vd_waiter_free(struct vd_waiter *waiter);

/* ---- The queue on Slurm (slurm.c) ------------------------------------- */

/* One Slurm job array of a sweep: jobs offset + each index of indices. */
struct vd_slurm_array {
	char *id;      /* Slurm's job id; NULL until sbatch answered */
	size_t offset; /* job number of index 0 */
	size_t njobs;  /* how many jobs it holds */
	char *indices; /* sbatch's --array value, without %K: "0-39", "3,7,19-21" */
};

/*
 * jobs (n job numbers, ascending) as Slurm's index list counted from
 * offset: "0-39", "3,7,19-21". Errors: VD_ENOMEM.
 */
VD_API int vd_slurm_indices(char **out, const size_t *jobs, size_t n, size_t offset);

/*
 * jobs (ascending) as few job arrays as Slurm takes: an index must stay
 * below max_array (MaxArraySize), so jobs are split in windows of
 * max_array numbers, each array counted from its window's start.
 * Errors: VD_EINVAL for max_array 0, VD_ENOMEM.
 */
VD_API int vd_slurm_split(struct vd_slurm_array **out, size_t *narrays, const size_t *jobs,
			  size_t n, size_t max_array);
VD_API void vd_slurm_arrays_free(struct vd_slurm_array *arrays, size_t n);

/* MaxArraySize from `scontrol show config`'s text. Errors: VD_EPARSE. */
VD_API int vd_slurm_max_array(size_t *out, const char *text);

/* One array task as `squeue -h -r -o '%i %t'` lists it: "123_4 R". */
struct vd_slurm_task {
	char array[64]; /* the array's job id */
	size_t task;	/* the index */
	char state[32]; /* Slurm's short state: PD, R, CG, ... */
};

/* The tasks of squeue's text; other lines are passed over. Errors: VD_ENOMEM. */
VD_API int vd_slurm_tasks_parse(struct vd_slurm_task **out, size_t *n, const char *text);

/*
 * A sweep handed to Slurm, as its state directory's queue.json keeps it: the
 * jobs frozen when it was submitted, and every array submitted for it.
 */
struct vd_slurm_queue {
	char *dir;	 /* the state directory (set by vd_slurm_queue_read) */
	char *name;	 /* the job file's name, "grid" or "stdin" */
	char *job_name;	 /* its jobs' name in Slurm (sbatch --job-name), unique to it */
	char *source;	 /* the job file's absolute path; NULL for a grid or stdin */
	uint64_t digest; /* of the jobs, as vd_jobs' */
	char **commands; /* job i is commands[i] */
	size_t njobs;
	unsigned gpus;	    /* per job (sbatch --gres=gpu:G); 0 none */
	char **sbatch_args; /* the rest of sbatch's options, as given */
	size_t nargs;
	struct vd_slurm_array *arrays;
	size_t narrays;
	int cancelled; /* --cancel was asked: nothing is submitted again but by --resume */
};

/* How many arrays recorded for q hold job: the times it was submitted. */
VD_API size_t vd_slurm_submissions(const struct vd_slurm_queue *q, size_t job);

/*
 * Reads queue.json's text, or DIR/queue.json. Errors: VD_EPARSE (not one
 * visdev wrote), VD_ENOTFOUND (no such file), VD_EIO, VD_ENOMEM.
 */
VD_API int vd_slurm_queue_parse(struct vd_slurm_queue **out, const char *text, size_t len);
VD_API int vd_slurm_queue_read(struct vd_slurm_queue **out, const char *dir);

/* Writes q to q->dir/queue.json, whole or not at all. Errors: VD_EIO, VD_ENOMEM. */
VD_API int vd_slurm_queue_write(const struct vd_slurm_queue *q);
VD_API void vd_slurm_queue_free(struct vd_slurm_queue *q);

/* ---- The lease audit: who misuses a leased GPU (audit.c) --------------- */

/* What /proc says of one process: enough to tell whose job it is part of. */
struct vd_proc {
	int32_t pid, ppid, pgid;
	uint32_t uid;
	char name[VD_PROCNAME_MAX];   /* the executable's short name: "python3" */
	char command[VD_COMMAND_MAX]; /* its command line, the words joined by blanks, cut */
	int64_t start;		      /* when it started, seconds since the epoch; 0 unknown */
};

struct vd_procs {
	struct vd_proc *procs; /* by pid */
	size_t n;
};

/*
 * Reads from /proc each process that sys lists on a GPU, and its parents.
 * A process /proc does not show (gone, or in another PID namespace, as
 * NVML's host pids are in a container) is left out: the audit does not
 * judge it. Errors: VD_ENOMEM. Free with vd_procs_free().
 */
VD_API int vd_procs_read(struct vd_procs **out, const struct vd_system *sys);

/* What procs says of process pid, or NULL when it does not show it. */
VD_API const struct vd_proc *vd_procs_find(const struct vd_procs *procs, uint32_t pid);
VD_API void vd_procs_free(struct vd_procs *procs);

/* After how many minutes quiet a lease is idle, unless the caller says otherwise. */
#define VD_AUDIT_IDLE_DEFAULT_MIN 30

/* How a lease's job uses its devices, as far as this look and earlier ones tell. */
enum vd_lease_use {
	VD_USE_UNKNOWN = 0, /* nothing to tell by: no process list, no utilisation of its own */
	VD_USE_ACTIVE,	    /* a process of its job on its GPU, or its whole GPU at work */
	VD_USE_QUIET,	    /* neither, for less than the idle threshold */
	VD_USE_IDLE,	    /* neither, at every look for at least the idle threshold */
};

/* "unknown", "active", "quiet", "idle"; NULL out of range. */
VD_API const char *vd_lease_use_name(enum vd_lease_use use);

/* What the audit says of one lease. */
struct vd_lease_audit {
	enum vd_lease_use use;
	int64_t quiet_s;	 /* quiet or idle: seconds since a look first saw it so; else -1 */
	size_t nsquatters;	 /* processes on its GPU outside the job of every lease there */
	int64_t unexplained_mib; /* memory in use on its GPU that no listed process explains,
				    past 1 GiB; else 0 */
};

enum vd_audit_kind {
	VD_AUDIT_SQUATTER,    /* a process on a leased GPU, part of no job that leases it */
	VD_AUDIT_UNEXPLAINED, /* memory in use on a leased GPU that no listed process explains */
	VD_AUDIT_IDLE,	      /* a lease whose job has not used its devices for the threshold */
};

/* "squatter", "unexplained_memory", "idle_lease"; NULL out of range. */
VD_API const char *vd_audit_kind_name(enum vd_audit_kind kind);

/* One finding. Findings about a GPU (squatter, memory) name the first lease on it. */
struct vd_audit_finding {
	enum vd_audit_kind kind;
	size_t lease;		      /* index into the leases audited */
	char uuid[VD_UUID_MAX];	      /* squatter, memory: the GPU; idle: the lease's device */
	int32_t pid;		      /* squatter: the process; idle: the job's first process */
	uint32_t uid;		      /* the process's (the job's) owner */
	char user[32];		      /* and the owner's name */
	char command[VD_COMMAND_MAX]; /* its command line */
	int64_t mib;		      /* squatter: its memory (-1 unknown); memory: the amount */
	int64_t seconds;	      /* idle: for how long */
};

struct vd_audit {
	struct vd_lease_audit *leases; /* one per holder audited, in the same order */
	size_t nleases;
	struct vd_audit_finding *findings; /* squatters and memory by GPU, then idle leases */
	size_t n;
};

/*
 * What one auditor remembers between looks: since when each lease has
 * looked quiet. Kept per user (vd_audit_memory_path()), never in the shared
 * lease directory, so that nobody can make another's lease look idle.
 */
struct vd_audit_memory;

/*
 * The default file of the memory: $XDG_STATE_HOME/visdev/audit, else
 * ~/.local/state/visdev/audit; NULL with neither variable set.
 */
VD_API const char *vd_audit_memory_path(void);
VD_API int vd_audit_memory_new(struct vd_audit_memory **out);

/* Reads a memory's text. Errors: VD_EPARSE (with its line), VD_ENOMEM. */
VD_API int vd_audit_memory_parse(struct vd_audit_memory **out, const char *text, size_t len);

/*
 * Reads the memory at path; no file is an empty memory. Errors: VD_EIO, and
 * as vd_audit_memory_parse(), the message naming path.
 */
VD_API int vd_audit_memory_load(struct vd_audit_memory **out, const char *path);

/*
 * Writes the memory to path, whole or not at all, when vd_audit() changed
 * it (the default path's folders are made). Errors: VD_EIO, VD_ENOMEM.
 */
VD_API int vd_audit_memory_save(struct vd_audit_memory *memory, const char *path);
VD_API void vd_audit_memory_free(struct vd_audit_memory *memory);

/*
 * The audit of the leases (vd_leases_read()'s, holds of the line skipped)
 * on sys, with procs (vd_procs_read()'s) at time now (seconds since the
 * epoch). A lease is idle when every look, from the first that saw it
 * quiet until now, saw it quiet, for at least idle_after_s; memory, when
 * not NULL, holds the earlier looks and is updated with this one (without
 * it, nothing is judged idle). A process is part of a job when it is the
 * job's first process, in its process group, a descendant of its first
 * process, or the job's user's visdev. Pure. Errors: VD_ENOMEM. Free with
 * vd_audit_free().
 */
VD_API int vd_audit(struct vd_audit **out, const struct vd_system *sys,
		    const struct vd_leases *leases, const struct vd_procs *procs,
		    struct vd_audit_memory *memory, int64_t now, int64_t idle_after_s);
VD_API void vd_audit_free(struct vd_audit *audit);

/*
 * vd_audit() now, with what /proc says (vd_procs_read(); kept in *procs
 * when procs is not NULL, for the caller to free) and this user's memory at
 * vd_audit_memory_path(), read and written back. When the memory cannot be
 * kept (no HOME, a damaged or unwritable file), the audit is still made and
 * *warning says what (free() it); else *warning is NULL. Errors: VD_ENOMEM.
 */
VD_API int vd_audit_now(struct vd_audit **out, struct vd_procs **procs, const struct vd_system *sys,
			const struct vd_leases *leases, int64_t idle_after_s, char **warning);

/* ---- The queue's jobs: a job file or a grid (jobs.c, pure) ------------ */

/*
 * The most jobs one queue holds, from a file, a grid or a journal's header:
 * more is surely a mistake (split the sweep), and bounds what a damaged
 * journal can make a reader allocate.
 */
#define VD_JOBS_MAX 1000000

/*
 * The jobs of a queue, in order: shell command lines, each run as
 * `/bin/sh -c COMMAND`. Job i is commands[i]. Plain data: read it, do not
 * modify it. Free with vd_jobs_free().
 */
struct vd_jobs {
	char **commands;
	unsigned *lines; /* from a job file: the line job i is on (from 1); NULL from a grid */
	size_t n;
	uint64_t digest; /* of every command in order: tells a changed job list */
};

/*
 * Reads a job file's text (len bytes): one command a line; a blank line, and
 * a line whose first non-blank character is '#', are skipped; a line's
 * ending "\r\n" counts as "\n". Errors: VD_EPARSE for a NUL byte (it
 * is no text) with its line, VD_EINVAL for more than VD_JOBS_MAX jobs,
 * VD_ENOMEM.
 */
VD_API int vd_jobs_parse(struct vd_jobs **out, const char *text, size_t len);

/*
 * The jobs of a template over a grid: one job per combination of the
 * values, each {name} in template replaced by that axis's value. Each
 * grid is "name=value,value,...", as --grid gives it; names are letters,
 * digits and '_'. The first grid varies slowest: lr=1,2 then bs=3,4 gives
 * lr 1 bs 3, lr 1 bs 4, lr 2 bs 3, lr 2 bs 4. "${...}" is the shell's, not
 * a placeholder; "{{" and "}}" are a literal brace. Errors: VD_EINVAL for
 * a {name} no grid gives, a grid the template never uses, a grid named
 * twice, one with no name or no values or an empty value, an unclosed
 * brace, or more than VD_JOBS_MAX jobs; the message says which. VD_ENOMEM.
 */
VD_API int vd_jobs_grid(struct vd_jobs **out, const char *templ, const char *const *grids,
			size_t ngrids);
VD_API void vd_jobs_free(struct vd_jobs *jobs);

/* ---- The queue's journal: what ran, and how it ended (journal.c) ------- */

/*
 * A queue's journal is a text file of records, one a line, appended as jobs
 * start and end: a header naming the job list (its number of jobs and
 * digest) and the queue's pid, then "start" and "end" records. A record is
 * whole once its newline is written; a crash mid-write leaves a torn last
 * line, which readers skip and the next writer cuts off. docs/queue.md has
 * the format.
 */

enum vd_job_state {
	VD_JOB_PENDING = 0, /* never started */
	VD_JOB_RUNNING,	    /* started, no end recorded: running, or cut off by a crash */
	VD_JOB_DONE,	    /* ended with status 0 */
	VD_JOB_FAILED,	    /* ended with another status */
};

/* "pending", "running", "done", "failed"; NULL out of range. */
VD_API const char *vd_job_state_name(enum vd_job_state state);

/* What the journal says of one job: its last start and end. */
struct vd_journal_job {
	enum vd_job_state state;
	int status;		  /* the last end's: an exit status, 128+N for signal N */
	unsigned starts;	  /* how many times it was started */
	int64_t start_ms, end_ms; /* the last start and end, ms since the epoch; 0: none */
	int32_t pid;		  /* the last start's process (and process group) */
	char *devices;		  /* the last start's devices: UUIDs, comma-separated; "" the CPU */
	char *command;		  /* the last start's command line; NULL before any start */
	char *node;		  /* the host it ran on, for a Slurm task; NULL otherwise */
};

struct vd_journal {
	size_t njobs;		     /* as the last header says */
	uint64_t digest;	     /* as the last header says */
	int32_t pid;		     /* the queue that wrote the last header */
	struct vd_journal_job *jobs; /* njobs of them */
	size_t whole;		     /* bytes up to the end of the last whole record */
	int torn;		     /* bytes after it: a record cut short */
};

/*
 * Reads a journal's text (len bytes): the records up to the last whole one.
 * Records of jobs beyond the header's count are ignored. Errors: VD_EPARSE
 * for a whole record that is not one (with its line), a header of more
 * than VD_JOBS_MAX jobs, or no header first;
 * VD_ENOMEM. Free with vd_journal_free().
 */
VD_API int vd_journal_parse(struct vd_journal **out, const char *text, size_t len);

/*
 * Reads the journal at path. Errors: VD_ENOTFOUND when there is none,
 * VD_EIO, VD_EPERM for a file that is not a regular one, and as
 * vd_journal_parse().
 */
VD_API int vd_journal_read(struct vd_journal **out, const char *path);
VD_API void vd_journal_free(struct vd_journal *journal);

/*
 * Whether a queue is writing the journal at path now: 1 (and its pid in
 * *pid, when known), 0 when none is, or a negative error (VD_ENOTFOUND).
 */
VD_API int vd_journal_busy(const char *path, int32_t *pid);

/*
 * Opens the journal at path for a queue of jobs, and holds it (flock) so
 * that no other queue writes it meanwhile. A new journal (append 0) starts
 * empty; append 1 keeps what is there, cuts off a torn last record, and
 * adds a header when the jobs differ from the last one's. Errors: VD_EBUSY
 * when another queue holds it, VD_EPERM for a link or a file that is not a
 * regular one, VD_EIO, VD_ENOMEM. Close with vd_journal_close().
 */
struct vd_journal_writer;
VD_API int vd_journal_open(struct vd_journal_writer **out, const char *path,
			   const struct vd_jobs *jobs, int append);

/*
 * Records that job started as process pid on devices (UUIDs,
 * comma-separated; "" for the CPU), running command. Written at once, made
 * durable by the next vd_journal_sync(). Errors: VD_EIO.
 */
VD_API int vd_journal_start(struct vd_journal_writer *w, size_t job, int32_t pid,
			    const char *devices, const char *command);
/* The same, for a Slurm task, with the host it runs on (NULL: as vd_journal_start()). */
VD_API int vd_journal_start_on(struct vd_journal_writer *w, size_t job, int32_t pid,
			       const char *devices, const char *command, const char *node);

/* Records that job ended with status (an exit status, or 128+N for signal N). Errors: VD_EIO. */
VD_API int vd_journal_end(struct vd_journal_writer *w, size_t job, int status);

/*
 * Makes every record written so far durable (one fdatasync for them all;
 * nothing when nothing is new): call it before reporting an end. Errors:
 * VD_EIO.
 */
VD_API int vd_journal_sync(struct vd_journal_writer *w);

/* Syncs, lets go of the journal and frees the writer. NULL does nothing. */
VD_API void vd_journal_close(struct vd_journal_writer *w);

/* ---- The queue's state: which job runs next (queue.c, pure) ----------- */

/*
 * What a dispatcher (the local one of `visdev queue`, Slurm's) needs to know
 * of a queue's jobs, whatever runs them: which job is next, which to run
 * again, and how each went. Pure: it starts nothing and reads no file.
 */

/* One job, as the queue knows it: from the journal, then from this run. */
struct vd_queue_job {
	enum vd_job_state state;
	int status;	 /* its last run's, once ended: an exit status, 128+N for signal N */
	unsigned starts; /* all runs together, the journal's included */
	double seconds;	 /* its last run's length; < 0 unknown */
	char *uuids;	 /* its last start's devices, comma-separated; NULL never started */
};

/* The counts of a queue: this run's, and its jobs' states now. */
struct vd_queue_counts {
	size_t to_run;	/* the jobs this run set out to run */
	size_t pending; /* waiting to start (retries included) */
	size_t running;
	size_t done, failed; /* ended in this run, with status 0 or not (a retried run
				counts once it is the last) */
};

struct vd_queue;

/*
 * A queue of njobs jobs. With journal (a resume), each job starts as the
 * journal left it, and only the jobs not done are to run; else every job
 * is. A job that fails is run again, before any other, up to retries more
 * times. Errors: VD_ENOMEM. Free with vd_queue_free().
 */
VD_API int vd_queue_new(struct vd_queue **out, size_t njobs, const struct vd_journal *journal,
			unsigned retries);

/*
 * Whether jobs may run against the journal of path (NULL: none yet): with
 * resume, the journal must be of the same jobs (digest and number) unless
 * force; without, a journal of the same jobs that shows a run cut short (a
 * job pending or cut off) is not thrown away unless force. Errors:
 * VD_EINVAL, the message saying what changed ("job 3 (line 5) was '...'
 * and is now '...'") or what would be lost.
 */
VD_API int vd_queue_check(const struct vd_jobs *jobs, const struct vd_journal *journal, int resume,
			  int force);

/* The job to start next, in order (a retry first); -1 when none is, or the queue is stopped. */
VD_API long vd_queue_next(const struct vd_queue *q);

/* Job was started on uuids (comma-separated; "" none). Errors: VD_EINVAL, VD_ENOMEM. */
VD_API int vd_queue_started(struct vd_queue *q, size_t job, const char *uuids);

/*
 * Job ended with status after seconds: done, failed, or (retries left, not
 * stopped) pending again, first in line. Errors: VD_EINVAL for a job not running.
 */
VD_API int vd_queue_ended(struct vd_queue *q, size_t job, int status, double seconds);

/* No job starts from now on, and none is run again. */
VD_API void vd_queue_stop(struct vd_queue *q);

/* Job i (i below the queue's count), and the counts. */
VD_API const struct vd_queue_job *vd_queue_job(const struct vd_queue *q, size_t i);
VD_API void vd_queue_counts(const struct vd_queue *q, struct vd_queue_counts *out);
VD_API void vd_queue_free(struct vd_queue *q);

/* ---- The doctor: why a program does not see the GPUs it should (doctor.c) -- */

/*
 * Each thing the doctor finds is data: a stable id ("visible-out-of-range"),
 * a severity, a message, where it was found (a variable, "FILE:LINE", a
 * pid) and a fix in one line. The checks here are pure, over text given to
 * them; `visdev doctor` adds those of the machine.
 */
enum vd_severity {
	VD_SEVERITY_INFO = 0,
	VD_SEVERITY_WARNING,
	VD_SEVERITY_ERROR,
};

/* "info", "warning", "error"; NULL out of range. */
VD_API const char *vd_severity_name(enum vd_severity severity);

struct vd_finding {
	const char *id; /* static */
	enum vd_severity severity;
	char *message;
	char *where; /* "CUDA_VISIBLE_DEVICES", "~/.bashrc:12", "train.py:3", "pid 4242" */
	char *fix;   /* one line; "" when there is nothing to do */
};

/* A growing list of findings: zero it to start, vd_findings_release() to end. */
struct vd_findings {
	struct vd_finding *items;
	size_t n, cap;
};

VD_API void vd_findings_release(struct vd_findings *f);

/*
 * Adds a finding to f: id static, where and fix copied (NULL: ""), the
 * message formatted. Errors: VD_ENOMEM.
 */
VD_API int vd_findings_add(struct vd_findings *f, const char *id, enum vd_severity severity,
			   const char *where, const char *fix, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));

/*
 * The environment env (as environ), on the machine sys: CUDA_VISIBLE_DEVICES
 * explained through the engine (ordinals past the last GPU, a value that
 * makes nothing visible, an unknown or ambiguous UUID prefix, quotes or
 * blanks kept, MIG devices the driver will not enumerate together), the
 * near misses of the names, CUDA_DEVICE_ORDER unset on a server with more
 * than one model, NVIDIA_VISIBLE_DEVICES against CUDA_VISIBLE_DEVICES, and
 * Slurm's SLURM_JOB_GPUS / SLURM_STEP_GPUS against it. where names the
 * environment in each finding ("the environment", "pid 4242"). Errors:
 * VD_ENOMEM.
 */
VD_API int vd_doctor_env(struct vd_findings *out, const struct vd_system *sys, char *const *env,
			 const char *where);

/*
 * A shell start-up file's text (~/.bashrc, /etc/environment, ...): each line
 * that sets CUDA_VISIBLE_DEVICES (export, a plain assignment, env, setenv),
 * with its value checked on sys. path names the file in the findings.
 * Errors: VD_ENOMEM.
 */
VD_API int vd_doctor_startup(struct vd_findings *out, const struct vd_system *sys, const char *text,
			     size_t len, const char *path);

/*
 * A Python script's text, read and never run: the variable set after
 * `import torch` (a warning) or after CUDA has started (an error); device
 * numbers (device_ids=[...], "cuda:N", set_device(N)) beyond what the
 * script will see, with the value it sets (else env_value, the
 * environment's; NULL unset); misspelt names; values the engine rejects.
 * Comments and strings are not code. Text that is not UTF-8, or has NUL
 * bytes, is a finding. Errors: VD_ENOMEM.
 */
VD_API int vd_doctor_script(struct vd_findings *out, const struct vd_system *sys, const char *text,
			    size_t len, const char *path, const char *env_value,
			    const char *env_order);

/*
 * Copies src into dst (of size n, n > 0) as valid UTF-8: a byte that does
 * not begin a valid sequence becomes '?', and the copy is cut on a
 * character boundary. Returns the length written. For text from users or
 * processes that must go into JSON.
 */
VD_API size_t vd_utf8_copy(char *dst, const char *src, size_t n);

/*
 * Writes the time t (seconds since the epoch) into buf (of size n) as ISO
 * 8601 local time with the offset, "2026-12-06T10:02:00+01:00"; "unknown"
 * for t <= 0. 26 bytes are always enough.
 */
VD_API void vd_format_time(char *buf, size_t n, int64_t t);

/* Frees an array of n strings returned by the library. */
VD_API void vd_strings_free(char **strings, size_t n);

#ifdef __cplusplus
}
#endif

#endif
