// app/course/progress_export.hpp — the progress a student hands in, signed, and its verification.
//
// File → Export progress… writes one JSON file:
//
//   { "format": "tttlab-progress-export", "version": 1,
//     "student": "Ada L. (2b)", "app_version": "0.9.0", "exported_at": "2026-11-28T23:50:00Z",
//     "course_id": "<32 hex>",            the pack's course ("" without a pack)
//     "signed": "course",                 or "unkeyed": no pack, anyone could have signed it
//     "progress": { … the whole progress file, as it is on disk, fields this build does not know
//                   included … },
//     "signature": "<64 hex>" }
//
// The signature is HMAC-SHA256 under the pack's progress key (course_key.hpp) over the canonical text
// of the object without "signature": nlohmann's compact dump, which sorts the keys. Without a pack the
// key is derived from a public label (unkeyed_progress_key): the signature then catches damage, not
// edits, and says so. The teacher's `tttlab lessons progress` recomputes it with the course key.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "course/course_key.hpp"
#include "course/course_pack.hpp"

namespace tttlab::course {

inline constexpr const char* kExportFormat = "tttlab-progress-export";
inline constexpr int kExportVersion = 1;
inline constexpr std::uint64_t kMaxExportBytes = 4u << 20;  // a class's export is a few KB

// The time now, "YYYY-MM-DDTHH:MM:SSZ" (UTC).
std::string iso_utc_now();

// The signed export of `progress` (the progress file's JSON).
nlohmann::json make_progress_export(const nlohmann::json& progress, const std::string& student,
                                    const CoursePack* pack, const std::string& app_version,
                                    const std::string& exported_at);

// Reads the progress file at `progress_file` as it is (an empty progress when it does not exist yet),
// signs it and writes `out` atomically. Throws std::runtime_error with a message for the student.
void export_progress(const std::filesystem::path& progress_file, const std::string& student,
                     const CoursePack* pack, const std::string& app_version, const std::filesystem::path& out);

struct ExportCheck {
  enum class Status { Ok, Tampered, Unkeyed, WrongCourse, Unreadable } status = Status::Unreadable;
  std::string student;
  std::string message;       // why: unreadable, tampered, wrong course
  nlohmann::json progress;   // the progress record (not for Unreadable)
  std::string exported_at, app_version;
};
const char* status_name(ExportCheck::Status s);  // "ok", "TAMPERED", "unkeyed", "wrong course", "unreadable"

// Verifies one export against the course (its derived keys).
ExportCheck verify_export_text(const std::string& text, const PackKeys& course);
ExportCheck verify_export_file(const std::filesystem::path& file, const PackKeys& course);

}  // namespace tttlab::course
