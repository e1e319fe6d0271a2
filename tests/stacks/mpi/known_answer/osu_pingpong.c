/* The project's own reference for two OSU point-to-point definitions (2 ranks), written from
 * OSU Micro-Benchmarks' documented definitions, not from their source:
 *   latency: rank 0 sends `size` bytes, rank 1 sends them back (blocking MPI_Send/MPI_Recv);
 *            one-way latency = elapsed / (2 * iterations), printed in microseconds.
 *   bw:      rank 0 posts a window of non-blocking sends of one buffer, waits for all, then
 *            waits for a short acknowledgement from rank 1; bandwidth = size * window *
 *            iterations / elapsed, printed in MB/s with MB = 10^6 bytes (as OSU prints).
 * Each (benchmark, size) is measured `reps` times (after `skip` untimed iterations), one line
 * per repetition: "latency <size> <us>" or "bw <size> <MB/s>", so the caller sees a spread.
 * Usage: osu_pingpong <latency|bw> <reps> <iterations> <window> <skip> <size>... */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACK_BYTES 4

static double latency_us(char *buf, int size, int iters, int skip, int rank)
{
    double t0 = 0.0;
    for (int i = 0; i < iters + skip; i++) {
        if (i == skip) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
        }
        if (rank == 0) {
            MPI_Send(buf, size, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, size, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, size, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, size, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
        }
    }
    /* a round trip is two messages: one way is half of it */
    return (MPI_Wtime() - t0) * 1e6 / (2.0 * iters);
}

static double bw_mb_s(char *sbuf, char *rbuf, int size, int iters, int window, int skip,
                      int rank, MPI_Request *reqs)
{
    char ack[ACK_BYTES] = {0};
    double t0 = 0.0;
    for (int i = 0; i < iters + skip; i++) {
        if (i == skip) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
        }
        if (rank == 0) {
            for (int j = 0; j < window; j++)
                MPI_Isend(sbuf, size, MPI_CHAR, 1, 2, MPI_COMM_WORLD, &reqs[j]);
            MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
            MPI_Recv(ack, ACK_BYTES, MPI_CHAR, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (int j = 0; j < window; j++)
                MPI_Irecv(rbuf, size, MPI_CHAR, 0, 2, MPI_COMM_WORLD, &reqs[j]);
            MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
            MPI_Send(ack, ACK_BYTES, MPI_CHAR, 0, 3, MPI_COMM_WORLD);
        }
    }
    double elapsed = MPI_Wtime() - t0;
    /* bytes sent one way (the acknowledgement not counted), MB = 10^6 bytes */
    return (double)size * window * iters / elapsed / 1e6;
}

int main(int argc, char **argv)
{
    int rank, ranks;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (ranks != 2 || argc < 7) {
        if (rank == 0)
            fprintf(stderr, "usage (2 ranks): %s <latency|bw> <reps> <iterations> <window> "
                            "<skip> <size>...\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    int bw = strcmp(argv[1], "bw") == 0;
    int reps = atoi(argv[2]), iters = atoi(argv[3]), window = atoi(argv[4]);
    int skip = atoi(argv[5]);
    long most = 1;
    for (int a = 6; a < argc; a++)
        if (atol(argv[a]) > most)
            most = atol(argv[a]);
    char *sbuf = calloc((size_t)most, 1), *rbuf = calloc((size_t)most, 1);
    MPI_Request *reqs = calloc((size_t)(window > 0 ? window : 1), sizeof(MPI_Request));
    if (!sbuf || !rbuf || !reqs)
        MPI_Abort(MPI_COMM_WORLD, 3);
    memset(sbuf, 'a', (size_t)most);
    for (int a = 6; a < argc; a++) {
        int size = atoi(argv[a]);
        for (int r = 0; r < reps; r++) {
            double v = bw ? bw_mb_s(sbuf, rbuf, size, iters, window, skip, rank, reqs)
                          : latency_us(sbuf, size, iters, skip, rank);
            if (rank == 0)
                printf("%s %d %.6f\n", bw ? "bw" : "latency", size, v);
        }
    }
    fflush(stdout);
    free(sbuf);
    free(rbuf);
    free(reqs);
    MPI_Finalize();
    return 0;
}
