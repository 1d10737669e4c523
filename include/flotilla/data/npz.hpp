// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_DATA_NPZ_HPP_INCLUDED
#define FLOTILLA_DATA_NPZ_HPP_INCLUDED
// Reader for NumPy's .npz files: zip archives of .npy members, as np.savez() (members stored) and
// np.savez_compressed() (members deflated) write them. The archive is read through its central
// directory, the zip file's own index, not by scanning local headers; each member's CRC-32 is
// checked, and deflated members are inflated by flotilla's own decoder (gzip.hpp).
// load_npz_dataset() builds a Dataset from two members, inputs and labels or targets.
//
// Input is untrusted: errors are DataErrors naming the archive, the member and a byte offset in the
// archive (for a deflated member's content, in the inflated member, which the message says). Every
// size and offset the directory gives is checked against the archive's size before it is used; an
// inflated member is capped at the size the directory announces. ZIP64 archives (more than 65535
// members, or past 4 GiB) are refused with a message; the ZIP64 size fields that NumPy writes into
// local headers are not needed, since sizes come from the central directory.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flotilla/core/crc32.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/linkage.hpp"
#include "flotilla/data/ctr_reader.hpp"
#include "flotilla/data/dataset.hpp"
#include "flotilla/data/gzip.hpp"
#include "flotilla/data/idx.hpp"
#include "flotilla/data/npy.hpp"

namespace flotilla::data {

/// One member of a zip archive, as its central directory entry describes it.
struct ZipMember {
  std::string name;
  std::uint16_t method = 0;    ///< 0: stored, 8: deflated
  std::uint16_t flags = 0;
  std::uint32_t crc = 0;
  std::uint64_t compressed_size = 0;
  std::uint64_t size = 0;
  std::uint64_t local_header = 0;  ///< offset of its local header in the archive
  std::uint64_t entry = 0;         ///< offset of its central directory entry
};

/// An .npz archive read into memory, its directory parsed; members are parsed when asked for.
class NpzArchive {
 public:
  const std::string& name() const noexcept { return name_; }
  const std::vector<ZipMember>& members() const noexcept { return members_; }
  /// The arrays' names, as np.savez() was given them: members ending in ".npy", without it.
  std::vector<std::string> array_names() const {
    std::vector<std::string> names;
    for (const auto& m : members_)
      if (m.name.size() > 4 && m.name.compare(m.name.size() - 4, 4, ".npy") == 0) names.push_back(m.name.substr(0, m.name.size() - 4));
    return names;
  }
  /// Whether array `name` ("x", or the member name "x.npy") is in the archive.
  bool contains(std::string_view name) const noexcept { return find(name) != nullptr; }

  /// The bytes of a member, inflated if it is deflated, its size and CRC-32 checked.
  FLOTILLA_DECL std::vector<std::uint8_t> member_bytes(const ZipMember& member, std::size_t max_size = default_max_output) const;

  /// Array `name` ("x" or "x.npy"). Throws DataError naming the archive and the arrays it holds
  /// when there is no such member.
  FLOTILLA_DECL NpyArray array(std::string_view name, std::size_t max_size = default_max_output) const;

  /// Parses an archive held in memory; `name` is what errors call it.
  FLOTILLA_DECL static NpzArchive parse(std::vector<std::uint8_t> bytes, std::string name);

 private:
  const ZipMember* find(std::string_view name) const noexcept {
    for (const auto& m : members_)
      if (m.name.size() == name.size() + 4 && m.name.compare(0, name.size(), name) == 0 &&
          m.name.compare(name.size(), 4, ".npy") == 0)
        return &m;
    for (const auto& m : members_)
      if (m.name == name) return &m;
    return nullptr;
  }
  FLOTILLA_DECL void read_directory();

  std::string name_;
  std::vector<std::uint8_t> bytes_;
  std::vector<ZipMember> members_;
  std::size_t directory_ = 0;  // offset of the central directory: every member's data ends before it
};

/// Parses an .npz archive held in memory; `name` is what errors call it.
inline NpzArchive parse_npz(std::vector<std::uint8_t> bytes, std::string name) {
  return NpzArchive::parse(std::move(bytes), std::move(name));
}

/// Reads an .npz archive and its directory.
inline NpzArchive read_npz(const std::filesystem::path& path) { return parse_npz(read_file(path), path.string()); }

/// Which arrays of an .npz archive load_npz_dataset() reads (np.savez(path, x=inputs, y=labels)).
struct NpzArrays {
  std::string inputs = "x";
  std::string labels = "y";  ///< labels, or targets with ArrayDatasetOptions::kind = TargetKind::values
};

/// Loads a data set from two arrays of an .npz archive, as load_npy_dataset() does from two .npy
/// files: `arrays.inputs` of shape (samples, features...) and `arrays.labels` of labels or targets.
template <class T>
inline Dataset<T> load_npz_dataset(const std::filesystem::path& path, const NpzArrays& arrays = {},
                                   const ArrayDatasetOptions& options = {}) {
  const NpzArchive archive = read_npz(path);
  const NpyArray labels = archive.array(arrays.labels);
  const NpyArray inputs = archive.array(arrays.inputs);
  ArrayDatasetOptions o = options;
  if (o.name.empty()) o.name = path.string() + ":" + arrays.inputs;
  return detail::dataset_from_arrays<T>(inputs, labels, o);
}

#if FLOTILLA_IMPLEMENTATION
namespace detail {

inline constexpr std::uint32_t zip_local_signature = 0x04034b50;
inline constexpr std::uint32_t zip_entry_signature = 0x02014b50;
inline constexpr std::uint32_t zip_end_signature = 0x06054b50;
inline constexpr std::uint32_t zip64_locator_signature = 0x07064b50;

inline std::uint64_t load_le64_bytes(const std::uint8_t* p) noexcept {
  return static_cast<std::uint64_t>(load_le32(p)) | static_cast<std::uint64_t>(load_le32(p + 4)) << 32;
}

}  // namespace detail

FLOTILLA_DECL NpzArchive NpzArchive::parse(std::vector<std::uint8_t> bytes, std::string name) {
  NpzArchive a;
  a.name_ = std::move(name);
  a.bytes_ = std::move(bytes);
  a.read_directory();
  return a;
}

FLOTILLA_DECL void NpzArchive::read_directory() {
  const std::uint8_t* p = bytes_.data();
  const std::size_t size = bytes_.size();
  const auto fail = [&](std::size_t offset, const std::string& what) { throw DataError(name_, offset, what); };
  if (size >= 6 && p[0] == 0x93 && std::string_view(reinterpret_cast<const char*>(p + 1), 5) == "NUMPY")
    fail(0, "not an .npz archive: this is an .npy file; read it with read_npy()");
  // The end record is the last 22 bytes, unless the archive has a comment (up to 65535 bytes)
  // after it: search backwards for a signature whose comment length reaches exactly the end.
  constexpr std::size_t end_size = 22;
  if (size < end_size) fail(0, "not a zip archive: " + std::to_string(size) + " bytes is too short for one");
  std::size_t end = size;
  for (std::size_t at = size - end_size + 1; at-- > 0 && size - at <= end_size + 0xFFFF;) {
    if (detail::load_le32(p + at) == detail::zip_end_signature && detail::load_le16(p + at + 20) == size - at - end_size) {
      end = at;
      break;
    }
  }
  if (end == size) fail(size, "not a zip archive: no end-of-central-directory record in its last bytes");
  if (end >= 20 && detail::load_le32(p + end - 20) == detail::zip64_locator_signature)
    fail(end - 20, "ZIP64 archive (more than 65535 members or 4 GiB): not supported; save the arrays in smaller archives "
                   "or as .npy files");
  const std::uint32_t disk = detail::load_le16(p + end + 4);
  const std::uint32_t directory_disk = detail::load_le16(p + end + 6);
  const std::uint32_t entries_here = detail::load_le16(p + end + 8);
  const std::uint32_t entries = detail::load_le16(p + end + 10);
  const std::uint32_t directory_size = detail::load_le32(p + end + 12);
  const std::uint32_t directory_at = detail::load_le32(p + end + 16);
  if (entries == 0xFFFF || directory_size == 0xFFFFFFFFU || directory_at == 0xFFFFFFFFU)
    fail(end + 10, "ZIP64 archive (its end record defers to a ZIP64 record): not supported");
  if (disk != 0 || directory_disk != 0 || entries_here != entries)
    fail(end + 4, "a split (multi-disk) zip archive: not supported");
  if (directory_at > end || directory_size > end - directory_at)
    fail(end + 12, "the central directory (" + std::to_string(directory_size) + " bytes at offset " + std::to_string(directory_at) +
                       ") does not lie within the archive's " + std::to_string(end) + " bytes before its end record");
  constexpr std::size_t entry_size = 46;
  if (static_cast<std::uint64_t>(entries) * entry_size > directory_size)
    fail(end + 10, std::to_string(entries) + " members cannot fit in a central directory of " + std::to_string(directory_size) +
                       " bytes");
  directory_ = directory_at;
  members_.reserve(entries);
  std::size_t at = directory_at;
  const std::size_t directory_end = std::size_t{directory_at} + directory_size;
  for (std::uint32_t i = 0; i < entries; ++i) {
    if (directory_end - at < entry_size)
      fail(at, "central directory entry " + std::to_string(i) + " runs past the directory's end");
    if (detail::load_le32(p + at) != detail::zip_entry_signature)
      fail(at, "central directory entry " + std::to_string(i) + " has no entry signature (PK\\1\\2)");
    ZipMember m;
    m.entry = at;
    m.flags = static_cast<std::uint16_t>(detail::load_le16(p + at + 8));
    m.method = static_cast<std::uint16_t>(detail::load_le16(p + at + 10));
    m.crc = detail::load_le32(p + at + 16);
    m.compressed_size = detail::load_le32(p + at + 20);
    m.size = detail::load_le32(p + at + 24);
    const std::size_t name_len = detail::load_le16(p + at + 28);
    const std::size_t extra_len = detail::load_le16(p + at + 30);
    const std::size_t comment_len = detail::load_le16(p + at + 32);
    const std::uint32_t start_disk = detail::load_le16(p + at + 34);
    m.local_header = detail::load_le32(p + at + 42);
    if (name_len + extra_len + comment_len > directory_end - at - entry_size)
      fail(at + 28, "central directory entry " + std::to_string(i) + "'s name, extra field and comment run past the directory's end");
    m.name.assign(reinterpret_cast<const char*>(p + at + entry_size), name_len);
    // Sizes or offset that do not fit in 32 bits are in a ZIP64 extra field, in this order, only
    // for those whose 32-bit field is all ones.
    const bool wide_size = m.size == 0xFFFFFFFFU, wide_compressed = m.compressed_size == 0xFFFFFFFFU,
               wide_offset = m.local_header == 0xFFFFFFFFU;
    if (wide_size || wide_compressed || wide_offset) {
      std::size_t x = at + entry_size + name_len;
      const std::size_t x_end = x + extra_len;
      bool found = false;
      while (x_end - x >= 4) {
        const std::size_t id = detail::load_le16(p + x);
        const std::size_t len = detail::load_le16(p + x + 2);
        if (len > x_end - x - 4) fail(x, "member '" + m.name + "': its extra field runs past its end");
        if (id == 1) {
          std::size_t f = x + 4;
          const auto take = [&](std::uint64_t& v) {
            if (f + 8 > x + 4 + len) fail(f, "member '" + m.name + "': its ZIP64 extra field is too short");
            v = detail::load_le64_bytes(p + f);
            f += 8;
          };
          if (wide_size) take(m.size);
          if (wide_compressed) take(m.compressed_size);
          if (wide_offset) take(m.local_header);
          found = true;
          break;
        }
        x += 4 + len;
      }
      if (!found) fail(at + 20, "member '" + m.name + "': its sizes defer to a ZIP64 extra field that is not there");
    }
    if (start_disk != 0 && start_disk != 0xFFFF) fail(at + 34, "member '" + m.name + "' starts on another disk of a split archive");
    if (m.local_header > directory_at || m.compressed_size > directory_at - m.local_header)
      fail(at + 42, "member '" + m.name + "': its data (" + std::to_string(m.compressed_size) + " bytes after offset " +
                        std::to_string(m.local_header) + ") does not lie before the central directory at " +
                        std::to_string(directory_at));
    members_.push_back(std::move(m));
    at += entry_size + name_len + extra_len + comment_len;
  }
}

FLOTILLA_DECL std::vector<std::uint8_t> NpzArchive::member_bytes(const ZipMember& m, std::size_t max_size) const {
  const std::uint8_t* p = bytes_.data();
  const auto fail = [&](std::uint64_t offset, const std::string& what) { throw DataError(name_, offset, "member '" + m.name + "': " + what); };
  if (m.flags & 1U) fail(m.entry + 8, "encrypted: not supported");
  if (m.method != 0 && m.method != 8)
    fail(m.entry + 10, "compression method " + std::to_string(m.method) +
                           " is not supported (0, stored, as np.savez() writes, and 8, deflated, as np.savez_compressed() does)");
  constexpr std::size_t local_size = 30;
  const std::size_t lh = static_cast<std::size_t>(m.local_header);
  if (directory_ - lh < local_size) fail(lh, "its local header runs into the central directory");
  if (detail::load_le32(p + lh) != detail::zip_local_signature) fail(lh, "no local header signature (PK\\3\\4) where the directory says");
  const std::size_t name_len = detail::load_le16(p + lh + 26);
  const std::size_t extra_len = detail::load_le16(p + lh + 28);
  if (detail::load_le16(p + lh + 8) != m.method)
    fail(lh + 8, "the local header's compression method " + std::to_string(detail::load_le16(p + lh + 8)) +
                     " differs from the directory's " + std::to_string(m.method));
  if (name_len + extra_len > directory_ - lh - local_size) fail(lh + 26, "its local header's name and extra field run into the central directory");
  if (std::string_view(reinterpret_cast<const char*>(p + lh + local_size), name_len) != m.name)
    fail(lh + local_size, "the local header names another member: " +
                              detail::quote_field(std::string_view(reinterpret_cast<const char*>(p + lh + local_size), name_len)));
  const std::size_t data = lh + local_size + name_len + extra_len;
  if (m.compressed_size > directory_ - data)
    fail(data, "its " + std::to_string(m.compressed_size) + " bytes of data run into the central directory at " +
                   std::to_string(directory_));
  const auto n = static_cast<std::size_t>(m.compressed_size);
  if (m.size > max_size)
    fail(m.entry + 24, "its size, " + std::to_string(m.size) + " bytes, is more than the " + std::to_string(max_size) + " allowed");
  std::vector<std::uint8_t> out;
  if (m.method == 0) {
    if (m.size != m.compressed_size)
      fail(m.entry + 20, "stored, but its compressed size " + std::to_string(m.compressed_size) + " differs from its size " +
                             std::to_string(m.size));
    out.assign(p + data, p + data + n);
  } else {
    if (m.size > m.compressed_size * deflate_max_ratio)
      fail(m.entry + 24, "its size, " + std::to_string(m.size) + " bytes, is more than its " + std::to_string(m.compressed_size) +
                             " deflated bytes can inflate to");
    try {
      out = inflate_raw(std::span<const std::uint8_t>(p + data, n), name_, static_cast<std::size_t>(m.size));
    } catch (const DataError& e) {
      fail(data + e.offset(), detail::reason_of(e));
    }
    if (out.size() != m.size)
      fail(data + n, "inflates to " + std::to_string(out.size()) + " bytes, the directory says " + std::to_string(m.size));
  }
  const std::uint32_t got = crc32(std::span<const std::uint8_t>(out));
  if (got != m.crc)
    fail(data, "CRC-32 mismatch: the directory says " + detail::hex32(m.crc) + ", the data gives " + detail::hex32(got) +
                   " (corrupt archive)");
  return out;
}

FLOTILLA_DECL NpyArray NpzArchive::array(std::string_view name, std::size_t max_size) const {
  const ZipMember* m = find(name);
  if (m == nullptr) {
    std::string names;
    for (const auto& n : array_names()) names += (names.empty() ? "'" : ", '") + n + "'";
    throw DataError(name_, 0, "no array '" + std::string(name) + "' in the archive (it holds " +
                                  (names.empty() ? std::string("no .npy members") : names) + ")");
  }
  std::vector<std::uint8_t> content = member_bytes(*m, max_size);
  const std::size_t lh = static_cast<std::size_t>(m->local_header);
  const std::size_t data = lh + 30 + detail::load_le16(bytes_.data() + lh + 26) + detail::load_le16(bytes_.data() + lh + 28);
  return NpyArray::parse(std::move(content), detail::NpySource{name_, m->name, m->method == 0 ? data : 0, m->method != 0});
}
#endif  // FLOTILLA_IMPLEMENTATION

}  // namespace flotilla::data
#endif  // FLOTILLA_DATA_NPZ_HPP_INCLUDED
