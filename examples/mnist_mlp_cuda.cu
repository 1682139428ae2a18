// The default example compiled by nvcc: the same program with the CUDA backend (--device auto
// trains on the GPU when one is usable, else on the CPU after one line saying why).
#include "mnist_mlp.cpp"
