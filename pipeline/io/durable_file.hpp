// The primitives of conveyor's own checksummed files (the dispatcher's journal, snapshot chunks):
// little-endian fields, masked CRC32C, complete writes, synced directories and whole-file reads.
// Errors are io_error naming the path and the OS's reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "pipeline/runtime/status.hpp"

namespace conveyor::durable {

void put_u32(char* p, uint32_t v);
uint32_t get_u32(const char* p);
void put_u64(char* p, uint64_t v);
uint64_t get_u64(const char* p);
// The masked CRC32C of n bytes (TFRecord's masking).
uint32_t masked(const char* p, std::size_t n);

std::string errno_text();
// Writes all n bytes (retrying short writes and EINTR).
Status write_all(int fd, const char* data, std::size_t n, const std::string& path);
// fsync of a directory: makes a rename or a new name in it durable.
Status sync_dir(const std::string& dir);
Expected<std::string> read_file(const std::string& path);

} // namespace conveyor::durable
