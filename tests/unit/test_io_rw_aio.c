/* test_io_rw_aio.c - the aio backend: batch {1, 8, 128} x read/write x plain and
 * registered buffers, data read back byte-exact, each completion once. */
#include "test_io_util.h"

int main(void)
{
	tio_rw_matrix(IO_BACKEND_AIO);
	printf("PASS\n");
	return 0;
}
