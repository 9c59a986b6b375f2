/*
 * devices.c
 *		llm.devices: the model workers a server runs, one per device.
 *
 * The setting is a comma-separated list of devices, each "cpu", "cuda"
 * (the first GPU) or "cuda:N"; a device may come more than once (two
 * workers on one GPU, or several on the CPU).  Empty (the default) means
 * one worker on llm.device.  It is read once, in the postmaster, which
 * registers one background worker per entry (worker.c); every worker loads
 * the same model and serves the one request queue, so two workers give
 * the answers one gives: an answer depends only on the model, the prompt,
 * the parameters and the seed, never on a device's load or thread count
 * within one kind of device.  So the list is all CPUs or all GPUs; one
 * mixing them is refused.  The CPU workers split llm.threads between
 * them, the first ones taking the remainder.
 */
#include "postgres.h"

#include <ctype.h>

#include "utils/guc.h"

#include "llm.h"

char	   *llm_devices = NULL;

/* The parsed setting (n = 0 until the postmaster has read it). */
static LlmDeviceList LlmDevices;

/*
 * Parse one entry, s[0..len), into *spec; false with *why set when it is
 * not a device.
 */
static bool
LlmParseDevice(const char *s, int len, LlmDeviceSpec *spec, const char **why)
{
	memset(spec, 0, sizeof(*spec));
	if (len == 3 && pg_strncasecmp(s, "cpu", 3) == 0)
	{
		spec->device = LLM_DEVICE_CPU;
		return true;
	}
	if (len >= 4 && pg_strncasecmp(s, "cuda", 4) == 0)
	{
		spec->device = LLM_DEVICE_CUDA;
		if (len == 4)
			return true;
		if (s[4] == ':' && len > 5 && len <= 8)
		{
			int			index = 0;

			for (int i = 5; i < len; i++)
			{
				if (!isdigit((unsigned char) s[i]))
				{
					*why = "A GPU's number is a non-negative integer.";
					return false;
				}
				index = index * 10 + (s[i] - '0');
			}
			spec->index = index;
			return true;
		}
		*why = "A GPU is written \"cuda\" or \"cuda:N\".";
		return false;
	}
	*why = "Each device is \"cpu\", \"cuda\" or \"cuda:N\".";
	return false;
}

/* Check hook of llm.devices: parse the list into a guc_malloc'd LlmDeviceList (*extra). */
bool
llm_devices_check(char **newval, void **extra, GucSource source)
{
	LlmDeviceList list;
	const char *p = *newval ? *newval : "";
	LlmDeviceList *copy;

	memset(&list, 0, sizeof(list));
	while (*p != '\0')
	{
		const char *start;
		const char *end;
		const char *why = NULL;

		while (isspace((unsigned char) *p))
			p++;
		start = p;
		while (*p != '\0' && *p != ',')
			p++;
		end = p;
		while (end > start && isspace((unsigned char) end[-1]))
			end--;
		if (end == start)
		{
			if (*p == '\0' && list.n == 0)
				break;			/* empty or blank: the default */
			GUC_check_errdetail("The list has an empty entry.");
			return false;
		}
		if (list.n == LLM_MAX_WORKERS)
		{
			GUC_check_errdetail("At most %d devices can be listed.", LLM_MAX_WORKERS);
			return false;
		}
		if (!LlmParseDevice(start, (int) (end - start), &list.specs[list.n], &why))
		{
			GUC_check_errdetail("\"%.*s\" is not a device. %s", (int) (end - start), start, why);
			return false;
		}
		list.n++;
		if (*p == ',')
		{
			p++;
			if (*p == '\0')
			{
				GUC_check_errdetail("The list ends with a comma.");
				return false;
			}
		}
	}
	for (int k = 1; k < list.n; k++)
		if (list.specs[k].device != list.specs[0].device)
		{
			GUC_check_errdetail("The devices must all be CPUs or all GPUs: answers are the same bits only on one kind of device.");
			return false;
		}
	/* 16 frees a setting's extra with guc_free(), 15 with free() */
#if PG_VERSION_NUM >= 160000
	copy = guc_malloc(LOG, sizeof(LlmDeviceList));
#else
	copy = malloc(sizeof(LlmDeviceList));
#endif
	if (copy == NULL)
		return false;
	*copy = list;
	*extra = copy;
	return true;
}

/* Assign hook of llm.devices: keep the parsed list. */
void
llm_devices_assign(const char *newval, void *extra)
{
	LlmDevices = *(LlmDeviceList *) extra;
}

/* How many model workers the server runs (1 when llm.devices is empty). */
int
LlmDeviceCount(void)
{
	return Max(LlmDevices.n, 1);
}

/*
 * Worker i's device: its llm.devices entry, or llm.device when the list is
 * empty.  threads is its share of llm.threads (total, 0: one per online
 * CPU, as n_cpus says) when it computes on the CPU among other CPU
 * workers; 0 (the engine's own choice of llm.threads) otherwise.
 */
LlmDeviceSpec
LlmDeviceOf(int i, int total_threads, int n_cpus)
{
	LlmDeviceSpec spec;
	int			n = LlmDevices.n;

	if (n == 0)
	{
		memset(&spec, 0, sizeof(spec));
		spec.device = llm_device;
		return spec;
	}
	spec = LlmDevices.specs[i];
	/* the list is all CPUs or all GPUs (llm_devices_check), so worker i is the i-th of n CPU workers */
	if (spec.device == LLM_DEVICE_CPU && n > 1)
	{
		int			total = total_threads > 0 ? total_threads : Max(n_cpus, 1);

		spec.threads = Max(1, total / n + (i < total % n ? 1 : 0));
	}
	return spec;
}
