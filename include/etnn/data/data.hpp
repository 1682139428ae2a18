#pragma once
// etnn::data, the face of data/: in-memory datasets, the IDX, NumPy (.npy, .npz) and CSV readers and
// the batching DataLoader.
#include "csv.hpp"
#include "data_loader.hpp"
#include "dataset.hpp"
#include "idx.hpp"
#include "idx_dataset.hpp"
#include "npy.hpp"
