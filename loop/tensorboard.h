// TensorBoard event files written directly, with no TensorFlow: a file is a sequence of TFRecords
//   uint64 length, uint32 masked CRC32C of the length, the data, uint32 masked CRC32C of the data
// (little-endian), each holding one serialized `Event` protobuf:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
// The first event carries file_version "brain.Event:2". TensorBoard reads every file named
// events.out.tfevents.* in a directory.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace jiriki::loop {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), and TFRecord's mask of it.
uint32_t crc32c(std::string_view bytes);
uint32_t masked_crc32c(std::string_view bytes);

struct Scalar {
  std::string tag;
  int64_t step = 0;
  double value = 0;      // stored as a float, as TensorBoard's simple_value is
  double wall_time = 0;  // seconds since the Unix epoch
};

// The bytes of one Event protobuf holding one scalar, and of the file_version event.
std::string scalar_event(const Scalar& s);
std::string version_event(double wall_time);
// One TFRecord around `data`.
std::string tf_record(std::string_view data);

// A whole event file: the version event, then one event per scalar. Written atomically (the
// loop writes one file per generation and may rewrite it when a generation's record is redone).
std::string event_file_bytes(const std::vector<Scalar>& scalars, double wall_time);
void write_event_file(const std::string& path, const std::vector<Scalar>& scalars, double wall_time);

}  // namespace jiriki::loop
