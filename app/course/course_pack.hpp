// app/course/course_pack.hpp — a student pack: the course with its answer key sealed.
//
// `tttlab lessons pack --student DIR` copies the lessons folder (every lesson, its scenes, the README)
// into DIR and seals, in each Markdown file, what a student must not read before answering:
//
//   - the values of the reveal:, answer:, explain:, expect: and claim: fields of the lesson blocks
//     (```predict, ```check, ```question, ```exercise) become   reveal: sealed:<base64>
//   - the condition after "|" of a choice: line becomes        choice: Below. | sealed:<base64>
//   - a section headed "## The reveal…" (to the next "# " or "## " heading) becomes a fenced
//     ```sealed block of base64 lines.
//
// Each sealed text is encrypted and authenticated with the pack's keys (course_key.hpp), exactly as
// written (line breaks included), so unsealing gives back the original file byte for byte. A pack is
// recognised by its manifest, course-pack.json:
//
//   { "format": "tttlab-course-pack", "version": 1, "course_id": "<32 hex>",
//     "keys": { "seal": "<64 hex>", "seal_mac": "<64 hex>", "progress": "<64 hex>" },
//     "classroom": { … as in a .tttlab state … }, "classroom_locked": true }
//
// read_lesson() unseals a lesson that lies next to such a manifest before parsing it, so the parser,
// the app and `tttlab lessons list/check` see the clear text in memory and nothing else changes.
#pragma once

#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "course/classroom.hpp"
#include "course/course_key.hpp"
#include "course/lesson.hpp"

namespace tttlab::course {

class PackError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr const char* kPackManifest = "course-pack.json";

struct CoursePack {
  std::filesystem::path dir;
  PackKeys keys;
  std::optional<ClassroomState> classroom;  // the teacher's settings, when the pack carries them
  bool classroom_locked = false;            // a student cannot switch them off (classroom.hpp)
};

// The pack in `dir`: nullopt when `dir` has no manifest (an ordinary lessons folder). Throws PackError
// naming the manifest when it is there but malformed.
std::optional<CoursePack> open_pack(const std::filesystem::path& dir);

// The text transforms (see above). seal_lesson_text leaves everything else byte for byte;
// unseal_lesson_text(seal_lesson_text(t)) == t. Unsealing throws PackError("<name>:<line>: …") when a
// sealed text does not open with `keys` (an edited pack, or another course's manifest).
std::string seal_lesson_text(std::string_view text, const PackKeys& keys);
std::string unseal_lesson_text(std::string_view text, const PackKeys& keys, const std::string& name);

struct PackOptions {
  std::filesystem::path source;  // the teacher's lessons folder
  std::filesystem::path out;     // the student pack: must not exist, or be an empty folder
  std::optional<ClassroomState> classroom;
  bool lock_classroom = false;
};

// Writes the pack: into a temporary folder beside `out`, then renamed, so a failure leaves nothing.
// Before the rename, every lesson of the pack is read back (unsealed) and must equal the source's.
// Returns the number of lessons packed. Throws PackError.
int write_student_pack(const PackOptions& options, const CourseKey& key);

// Whether two parsed lessons say the same thing (every field; scene paths by file name, since the
// pack lies elsewhere). `why` gets the first difference.
bool same_lesson(const Lesson& a, const Lesson& b, std::string* why = nullptr);

}  // namespace tttlab::course
