// app/course/progress_export.cpp — signing and verifying a progress export (see progress_export.hpp).
#include "course/progress_export.hpp"

#include <ctime>
#include <stdexcept>
#include <system_error>

#include "tttlab/io/atomic_file.hpp"

namespace tttlab::course {
namespace fs = std::filesystem;

namespace {

constexpr int kMaxExportDepth = 24;
constexpr std::size_t kMaxStudentChars = 200;

std::string signature_of(const nlohmann::json& doc, const Digest& key) {
  nlohmann::json body = doc;
  body.erase("signature");
  // The canonical text: compact, keys sorted (nlohmann's object is a std::map), UTF-8 as is.
  return crypto::to_hex(crypto::hmac_sha256(key, body.dump()));
}

ExportCheck unreadable(std::string why) {
  ExportCheck c;
  c.status = ExportCheck::Status::Unreadable;
  c.message = std::move(why);
  return c;
}

std::string string_field(const nlohmann::json& doc, const char* key) {
  const auto it = doc.find(key);
  return it != doc.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::string iso_utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

nlohmann::json make_progress_export(const nlohmann::json& progress, const std::string& student,
                                    const CoursePack* pack, const std::string& app_version,
                                    const std::string& exported_at) {
  nlohmann::json doc = {{"format", kExportFormat},
                        {"version", kExportVersion},
                        {"student", student},
                        {"app_version", app_version},
                        {"exported_at", exported_at},
                        {"course_id", pack ? pack->keys.course_id : std::string()},
                        {"signed", pack ? "course" : "unkeyed"},
                        {"progress", progress}};
  doc["signature"] = signature_of(doc, pack ? pack->keys.progress : unkeyed_progress_key());
  return doc;
}

void export_progress(const fs::path& progress_file, const std::string& student, const CoursePack* pack,
                     const std::string& app_version, const fs::path& out) {
  nlohmann::json progress = {{"format", "tttlab-course-progress"}, {"version", 1}, {"lessons", nlohmann::json::object()}};
  std::error_code ec;
  if (fs::exists(progress_file, ec)) {
    try {
      progress = nlohmann::json::parse(read_file_text(progress_file, kMaxExportBytes));
    } catch (const nlohmann::json::exception&) {
      throw std::runtime_error("your progress file " + progress_file.string() +
                               " cannot be read, so there is nothing to export (it is kept as it is)");
    }
  }
  if (!progress.is_object()) throw std::runtime_error("your progress file " + progress_file.string() + " is not a progress file");
  if (student.empty()) throw std::runtime_error("give your name or ID first: the teacher needs it to know whose progress this is");
  const nlohmann::json doc = make_progress_export(progress, student, pack, app_version, iso_utc_now());
  write_file_atomic(out, doc.dump(2) + "\n");  // FileError names the file
}

const char* status_name(ExportCheck::Status s) {
  switch (s) {
    case ExportCheck::Status::Ok: return "ok";
    case ExportCheck::Status::Tampered: return "TAMPERED";
    case ExportCheck::Status::Unkeyed: return "unkeyed";
    case ExportCheck::Status::WrongCourse: return "wrong course";
    case ExportCheck::Status::Unreadable: return "unreadable";
  }
  return "unreadable";
}

ExportCheck verify_export_text(const std::string& text, const PackKeys& course) {
  const auto depth_cap = [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxExportDepth) throw std::runtime_error("nests too deeply");
    return true;
  };
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text, depth_cap);
  } catch (const nlohmann::json::exception&) {
    return unreadable("not JSON: not a progress export");
  } catch (const std::runtime_error&) {
    return unreadable("nests arrays and objects too deeply: not a progress export");
  }
  if (!doc.is_object() || string_field(doc, "format") != kExportFormat)
    return unreadable(std::string("not a progress export (no \"format\": \"") + kExportFormat + "\")");
  if (!doc.contains("version") || !doc["version"].is_number_integer() || doc["version"].get<std::int64_t>() > kExportVersion)
    return unreadable("a progress export of another version (this build reads version " + std::to_string(kExportVersion) + ")");
  if (!doc.contains("progress") || !doc["progress"].is_object()) return unreadable("the export has no \"progress\" object");
  ExportCheck c;
  c.student = string_field(doc, "student");
  if (c.student.size() > kMaxStudentChars) c.student = c.student.substr(0, kMaxStudentChars);
  c.exported_at = string_field(doc, "exported_at");
  c.app_version = string_field(doc, "app_version");
  c.progress = doc["progress"];
  const std::string sig = string_field(doc, "signature");
  const std::string how = string_field(doc, "signed");
  const auto sig_bytes = crypto::from_hex(sig);
  auto signed_with = [&](const Digest& key) {
    const auto want = crypto::from_hex(signature_of(doc, key));
    return sig_bytes && crypto::equal_constant_time(*sig_bytes, *want);
  };
  if (how == "unkeyed") {
    c.status = signed_with(unkeyed_progress_key()) ? ExportCheck::Status::Unkeyed : ExportCheck::Status::Tampered;
    c.message = c.status == ExportCheck::Status::Unkeyed
                    ? "exported without the course pack: anyone could have written it"
                    : "the signature does not match: the file was changed after it was exported";
    return c;
  }
  if (how != "course") {
    c.status = ExportCheck::Status::Tampered;
    c.message = "\"signed\" is neither \"course\" nor \"unkeyed\"";
    return c;
  }
  if (string_field(doc, "course_id") != course.course_id) {
    c.status = ExportCheck::Status::WrongCourse;
    c.message = "exported from another course's pack (course " + string_field(doc, "course_id") + ")";
    return c;
  }
  if (!signed_with(course.progress)) {
    c.status = ExportCheck::Status::Tampered;
    c.message = "the signature does not match: the file was changed after it was exported";
    return c;
  }
  c.status = ExportCheck::Status::Ok;
  return c;
}

ExportCheck verify_export_file(const fs::path& file, const PackKeys& course) {
  std::string text;
  try {
    text = read_file_text(file, kMaxExportBytes);
  } catch (const FileError& e) {
    return unreadable(e.what());
  }
  return verify_export_text(text, course);
}

}  // namespace tttlab::course
