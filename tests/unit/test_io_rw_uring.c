/* test_io_rw_uring.c - the uring backend: batch {1, 8, 128} x read/write x plain and
 * registered buffers, data read back byte-exact, each completion once. */
#include "test_io_util.h"

int main(void)
{
	if (!tio_have_uring())
		tio_skip("SKIP: io_uring is not available here");
	tio_rw_matrix(IO_BACKEND_URING);
	printf("PASS\n");
	return 0;
}
