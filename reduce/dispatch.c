/*
 * dispatch.c — which kernel table weft_reduce_kernel() hands out: the AVX2
 * one where the CPU has AVX2 and F16C, unless WEFT_ISA=generic (or the test
 * hook of reduce_isa.h) asks for the generic one; decided once per process.
 */
#include <cpuid.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "reduce/reduce.h"
#include "reduce/reduce_isa.h"
#include "reduce/reduce_kernels.h"
#include "util/dtype.h"
#include "util/log.h"
#include "util/settings.h"

static pthread_once_t detect_once = PTHREAD_ONCE_INIT;
static bool cpu_has_avx2;  /* AVX2 and F16C, both used by the avx2 kernels */
static bool isa_generic;   /* WEFT_ISA=generic, or avx2 asked of a CPU without it */
static bool force_generic; /* the test hook */

enum isa_request { ISA_DEFAULT, ISA_GENERIC, ISA_AVX2, ISA_UNKNOWN };

static enum isa_request isa_request(const char *v)
{
	if (!v || !*v)
		return ISA_DEFAULT;
	if (strcmp(v, "generic") == 0)
		return ISA_GENERIC;
	if (strcmp(v, "avx2") == 0)
		return ISA_AVX2;
	return ISA_UNKNOWN;
}

/* What is wrong with WEFT_ISA on this CPU, if anything (see reduce.h). */
static weft_status_t isa_problem(char *why, size_t why_bytes)
{
	const char *v = weft_setting_str("WEFT_ISA");
	if (why_bytes)
		why[0] = '\0';
	switch (isa_request(v)) {
	case ISA_UNKNOWN:
		snprintf(why, why_bytes, "WEFT_ISA=%s: expected generic or avx2", v);
		return WEFT_ERR_INVALID_ARG;
	case ISA_AVX2:
		if (cpu_has_avx2)
			return WEFT_SUCCESS;
		snprintf(why, why_bytes,
			 "WEFT_ISA=avx2: this CPU lacks AVX2 or F16C (use generic)");
		return WEFT_ERR_NOT_SUPPORTED;
	default: return WEFT_SUCCESS;
	}
}

static void detect_cpu(void)
{
	unsigned int eax, ebx, ecx, edx;
	bool f16c;

	/* F16C from CPUID leaf 1 (ECX bit 29): older GCCs and clang do not know
	 * "f16c" in __builtin_cpu_supports. The "avx2" test also checks that
	 * the OS saves the ymm registers, which F16C needs too. */
	f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
	__builtin_cpu_init();
	cpu_has_avx2 = __builtin_cpu_supports("avx2") && f16c;

	/* A kernel lookup cannot fail, so a bad WEFT_ISA only warns here and
	 * keeps the CPU's best; communicator creation rejects it with an
	 * error (weft_reduce_isa_check), so a job never runs with it. */
	char why[160];
	if (isa_problem(why, sizeof(why)) != WEFT_SUCCESS)
		weft_log(WEFT_LOG_WARN, WEFT_SUB_ALL, "%s; the kernels use %s", why,
			 cpu_has_avx2 ? "avx2" : "generic");
	isa_generic = isa_request(weft_setting_str("WEFT_ISA")) == ISA_GENERIC;
}

weft_status_t weft_reduce_isa_check(char *why, size_t why_bytes)
{
	pthread_once(&detect_once, detect_cpu);
	return isa_problem(why, why_bytes);
}

bool weft_reduce_use_avx2(void)
{
	pthread_once(&detect_once, detect_cpu);
	return cpu_has_avx2 && !isa_generic && !force_generic;
}

void weft_reduce_force_generic(bool on)
{
	force_generic = on;
}

const char *weft_reduce_isa(void)
{
	return weft_reduce_use_avx2() ? "avx2" : "generic";
}

weft_reduce_fn weft_reduce_kernel(weft_datatype_t dtype, weft_op_t op)
{
	if (!weft_dtype_valid(dtype) || !weft_op_valid(op))
		return NULL;
	return weft_reduce_table(weft_reduce_use_avx2(), dtype, op);
}
