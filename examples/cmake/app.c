/*
 * app.c — a program built against an installed Weft: an AllReduce over
 * the ranks its launcher started, checked on every rank, and the header
 * it was compiled with checked against the library it runs with.
 *
 *   cmake -S examples/cmake -B app-build && cmake --build app-build   (find_package(Weft))
 *   cc examples/cmake/app.c $(pkg-config --cflags --libs weft) -o app
 *   weft-run -np 2 ./app
 *
 * make test builds it both ways against a make install
 * (tests/programs/test_install.sh); the Debian packages' autopkgtest
 * against libweft-dev (debian/tests/c-allreduce).
 */
#include <stdio.h>
#include <string.h>
#include <weft.h>

#define COUNT 1000

/* Every rank holds rank + i at i: the sum is nranks * i + nranks * (nranks - 1) / 2. */
static int check(const double *x, int nranks, int rank)
{
	for (int i = 0; i < COUNT; i++) {
		double want = (double)nranks * i + nranks * (nranks - 1) / 2.0;
		if (x[i] != want) {
			fprintf(stderr, "app: rank %d: element %d is %g, not %g\n", rank, i, x[i],
				want);
			return 1;
		}
	}
	return 0;
}

int main(void)
{
	char header[32];
	snprintf(header, sizeof(header), "%d.%d.%d", WEFT_VERSION_MAJOR, WEFT_VERSION_MINOR,
		 WEFT_VERSION_PATCH);
	if (strcmp(header, weft_version()) != 0) {
		fprintf(stderr, "app: compiled with weft.h %s, running libweft %s\n", header,
			weft_version());
		return 1;
	}
	weft_comm_t comm;
	if (weft_comm_init_env(&comm, NULL) != WEFT_SUCCESS) {
		fprintf(stderr, "app: init: %s\n", weft_init_last_error());
		return 1;
	}
	int rank = -1, nranks = 0;
	weft_comm_rank(comm, &rank);
	weft_comm_size(comm, &nranks);
	double x[COUNT];
	for (int i = 0; i < COUNT; i++)
		x[i] = rank + i;
	weft_status_t st = weft_allreduce(WEFT_IN_PLACE, x, COUNT, WEFT_FLOAT64, WEFT_SUM, comm);
	int rc = 1;
	if (st != WEFT_SUCCESS)
		fprintf(stderr, "app: rank %d: allreduce: %s: %s\n", rank, weft_status_string(st),
			weft_comm_last_error(comm));
	else if (check(x, nranks, rank) == 0)
		rc = 0;
	if (rc == 0)
		printf("app: rank %d of %d: allreduce of %d doubles correct (libweft %s)\n", rank,
		       nranks, COUNT, weft_version());
	weft_comm_destroy(comm);
	return rc;
}
