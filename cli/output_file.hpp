// The one output policy of the CLI (docs/outputs.md). Every command opens its
// outputs through Output, which decides by what the path names:
//  - a regular file (new or replaced) is written under a temporary name in the
//    same directory, fsynced and renamed, keeping the mode and owner of the
//    file it replaces; a new file that can hold plaintext or keys is 0600;
//  - a block device is written in place (no rename, no truncate);
//  - "-", a FIFO or a character device is a stream where the command can
//    write sequentially, and refused otherwise; a directory is refused;
//  - an NBD URI (docs/remote.md) is an export written in place, as a block
//    device is: a failed run leaves what it had written there;
//  - symlinks are resolved first, and no output may be an input.
// Temporary files are removed by a signal handler on INT, TERM, HUP, PIPE and
// QUIT, which then exits 128+signal; while a temporary file is being created
// and armed, or outputs renamed into place, the signal is held (see
// commit_all).
#pragma once

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/bytes.hpp>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <sys/types.h>

namespace cli {

// A file a command reads, named for messages ("IN", "the key file").
struct NamedPath {
    std::string role;
    std::string path;
};

struct OutputOptions {
    std::string role = "the output";  // how messages name it: "OUT", "--root-hash-file"
    bool secret = false;        // may hold plaintext or keys: a new file is created 0600
    bool can_stream = false;    // the command writes it in order: "-", FIFOs, char devices
    bool keep_content = false;  // a replaced file's temporary copy starts with its content
    bool in_place = false;      // write an existing regular file directly (crypt --in-place)
    // Only a regular file (new or replaced) under this very name: a symlink,
    // a device, a FIFO or "-" is refused, never followed (the pid file).
    bool regular_only = false;
    mode_t create_mode = 0666;  // a new file's mode before the umask (secret: 0600)
    std::vector<NamedPath> inputs;  // refused as this output (same st_dev/st_ino)
};

class Output {
public:
    enum class Kind {
        Temp,     // regular file through a temporary name
        InPlace,  // existing regular file written directly (--in-place)
        Device,   // block device written in place
        Stream,   // stdout, a FIFO or a character device
        Remote,   // an NBD export (URI) written in place
    };

    // Checks the path against the policy and opens it (a FIFO waits for its
    // reader). UsageError for what the policy refuses, Failure for I/O errors.
    Output(const std::string& path, OutputOptions opts);
    ~Output();  // removes an uncommitted temporary file
    Output(const Output&) = delete;
    Output& operator=(const Output&) = delete;

    Kind kind() const noexcept { return kind_; }
    bool seekable() const noexcept { return kind_ != Kind::Stream; }
    int fd() const noexcept { return fd_; }
    // The path as given; messages use it (never the temporary name).
    const std::string& name() const noexcept { return name_; }
    // What a store may open by path: the temporary file, or the resolved
    // file or device. Empty for a stream.
    const std::string& write_path() const noexcept { return write_path_; }
    // The store to write a seekable output through: an NBD export's own
    // connection (which finish() flushes), else write_path() opened.
    std::shared_ptr<blkcrypt::BackingStore> store();

    // Makes room for `bytes`: a regular file is allocated to at least that
    // size (ENOSPC/EDQUOT show here, with the real reason, not in a worker);
    // a block device is checked to be large enough; a stream is left alone.
    void reserve(uint64_t bytes);

    // Sequential (streams and files) and positioned (seekable only) writes.
    // Errors name the final path and the errno text.
    void write(blkcrypt::ConstBytes data);
    void pwrite(blkcrypt::ConstBytes data, uint64_t offset);

    // Forces the data to storage and closes. Part one of commit.
    void finish();
    // finish(), then the rename into place (temporary files).
    void commit() { commit_all({this}); }
    // Commits several outputs together: every one is finished (fsynced)
    // before any is renamed, so a failure before the renames replaces none.
    // The renames run in the order given, each followed by a directory sync;
    // a terminating signal never falls between them (it cancels the commit
    // before the first rename, or is held until the last is done). A failed
    // directory sync throws after all renames.
    static void commit_all(std::initializer_list<Output*> outputs);

    // "NAME: <strerror(err)>" with the final name.
    std::string error_text(int err) const;

private:
    // The constructor's steps.
    void refuse_inputs(const struct stat& st) const;  // UsageError when st is an input
    void open_stdout();
    void open_remote();
    void resolve_target();                     // target_, and the same-name check
    bool open_existing(const struct stat& st);  // a device, stream or in-place file; false: replace it
    void create_temp();                        // the temporary file, registered for the signal handler
    void take_over(const struct stat* replaced);  // owner, mode and (keep_content) content

    std::string rename_into_place();  // a directory sync failure, or empty
    void discard() noexcept;

    OutputOptions opts_;
    std::string name_;        // as given
    std::string target_;      // symlinks resolved
    std::string write_path_;  // temporary, or target_
    Kind kind_ = Kind::Temp;
    int fd_ = -1;
    bool owns_fd_ = true;
    bool finished_ = false;
    int slot_ = -1;          // in the signal handler's table of temporary files
    uint64_t pos_ = 0;       // sequential write position
    std::shared_ptr<blkcrypt::BackingStore> remote_;  // Kind::Remote
};

// The option that makes this command print on stdout ("--json",
// "--progress-json"), or empty. parse_command_line sets it for every command,
// so an output "-" is refused in one place (Output) while stdout is taken.
void set_stdout_report(std::string option);

// Writes data to path ("-" is stdout) through the policy above: the whole
// output appears at once or not at all.
void write_output(const std::string& path, blkcrypt::ConstBytes data, OutputOptions opts);

// Installs the cleanup handlers for INT, TERM, HUP, PIPE and QUIT (done by
// the first Output; idempotent).
void install_signal_cleanup();

// The path with every symlink resolved (the final target may not exist).
std::string resolve_links(const std::string& path);

// Whether a and b name one file: when both exist, the same inode (or one
// block device under two nodes); otherwise the same path once ".", ".." and
// symlinks are resolved ("s", "./s", "dir/../s").
bool same_file(const std::string& a, const std::string& b);

}  // namespace cli
