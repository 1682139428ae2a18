#pragma once
// etnn::data, the face of data/: in-memory datasets, the IDX reader and the batching DataLoader.
#include "data_loader.hpp"
#include "dataset.hpp"
#include "idx.hpp"
#include "idx_dataset.hpp"
