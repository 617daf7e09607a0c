#include "cryptsetup_options.hpp"

#include <algorithm>

namespace cli {
namespace {

enum class Kind {
    NoOp,     // accepted, changes nothing here
    Alias,    // cryptsetup's name for one of ours (`target`)
    Refused,  // would change what is read; refused with `why`
};

struct Compat {
    const char* name;   // long name, as cryptsetup spells it
    char short_name;    // cryptsetup's, used only where free here
    const char* arg;    // value name, or nullptr for a flag
    Kind kind;
    const char* text;   // NoOp: why nothing changes; Alias: our name; Refused: why
};

// cryptsetup 2.6.1's global options (src/cryptsetup_arg_list.h, empty allowed
// actions), checked against `cryptsetup ACTION --OPTION` for tcryptDump,
// bitlkDump, fvault2Dump, luksDump and open --type tcrypt|bitlk|fvault2|
// loopaes|plain|luks, plus the open-only device-mapper flags.
constexpr Compat kCompat[] = {
    {"batch-mode", 'q', nullptr, Kind::NoOp, "nothing to confirm here"},
    {"verbose", 'v', nullptr, Kind::NoOp, "no more to say here"},
    {"debug", 0, nullptr, Kind::NoOp, "no debug log"},
    {"debug-json", 0, nullptr, Kind::NoOp, "no debug log"},
    {"disable-locks", 0, nullptr, Kind::NoOp, "blkcrypt takes no metadata locks"},
    {"disable-keyring", 0, nullptr, Kind::NoOp, "blkcrypt never loads keys into the kernel keyring"},
    {"disable-external-tokens", 0, nullptr, Kind::NoOp, "blkcrypt loads no token plugins"},
    {"disable-blkid", 0, nullptr, Kind::NoOp, "nothing is wiped or probed here"},
    {"veracrypt", 0, nullptr, Kind::NoOp, "VeraCrypt headers are always tried (tcrypt: unless --disable-veracrypt)"},
    {"allow-discards", 0, nullptr, Kind::NoOp, "no device-mapper device is made"},
    {"persistent", 0, nullptr, Kind::NoOp, "no device-mapper device is made"},
    {"perf-same_cpu_crypt", 0, nullptr, Kind::NoOp, "no device-mapper device is made"},
    {"perf-submit_from_crypt_cpus", 0, nullptr, Kind::NoOp, "no device-mapper device is made"},
    {"perf-no_read_workqueue", 0, nullptr, Kind::NoOp, "no device-mapper device is made"},
    {"perf-no_write_workqueue", 0, nullptr, Kind::NoOp, "no device-mapper device is made"},
    {"serialize-memory-hard-pbkdf", 0, nullptr, Kind::NoOp, "one process, one KDF at a time"},
    {"use-directio", 0, nullptr, Kind::NoOp, "reencryption only"},
    {"use-fsync", 0, nullptr, Kind::NoOp, "reencryption only"},
    {"write-log", 0, nullptr, Kind::NoOp, "reencryption only"},
    {"init-only", 0, nullptr, Kind::NoOp, "reencryption only"},
    {"resume-only", 0, nullptr, Kind::NoOp, "reencryption only"},
    {"encrypt", 0, nullptr, Kind::NoOp, "reencryption only"},
    {"decrypt", 0, nullptr, Kind::NoOp, "reencryption only"},
    {"force-password", 0, nullptr, Kind::NoOp, "no password quality check"},
    {"integrity-legacy-padding", 0, nullptr, Kind::NoOp, "no dm-integrity"},
    {"integrity-no-journal", 0, nullptr, Kind::NoOp, "no dm-integrity"},
    {"token-only", 0, nullptr, Kind::NoOp, "no tokens here"},
    {"verify-passphrase", 'y', nullptr, Kind::NoOp, "an existing passphrase is checked by unlocking"},
    {"dump-json-metadata", 0, nullptr, Kind::NoOp, "LUKS2 only"},
    {"timeout", 0, "SECONDS", Kind::NoOp, "the prompt waits"},
    {"tries", 'T', "N", Kind::NoOp, "one try"},
    {"progress-frequency", 0, "SECONDS", Kind::NoOp, "no progress display here"},
    {"pbkdf-memory", 0, "KIB", Kind::NoOp, "a limit for new keyslots"},
    {"pbkdf-parallel", 0, "N", Kind::NoOp, "a limit for new keyslots"},
    {"key-description", 0, "DESC", Kind::NoOp, "no kernel keyring"},
    {"token-id", 0, "N", Kind::NoOp, "no tokens here"},
    {"token-type", 0, "TYPE", Kind::NoOp, "no tokens here"},
    {"json-file", 0, "FILE", Kind::NoOp, "LUKS2 tokens only"},
    {"header-backup-file", 0, "FILE", Kind::NoOp, "header backups only"},
    {"new-keyfile-offset", 0, "BYTES", Kind::NoOp, "new keyslots only"},
    {"new-keyfile-size", 0, "BYTES", Kind::NoOp, "new keyslots only"},
    {"active-name", 0, "NAME", Kind::NoOp, "reencryption only"},
    {"block-size", 'B', "MIB", Kind::NoOp, "reencryption only"},
    {"resilience", 0, "MODE", Kind::NoOp, "reencryption only"},
    {"resilience-hash", 0, "HASH", Kind::NoOp, "reencryption only"},
    {"reduce-device-size", 0, "BYTES", Kind::NoOp, "reencryption only"},
    {"cipher", 'c', "SPEC", Kind::NoOp, "the header names the cipher"},
    {"hash", 0, "HASH", Kind::NoOp, "the header names the hash"},  // -h stays --help here
    {"dump-volume-key", 0, nullptr, Kind::NoOp, "no volume key to print here"},
    // open only (cryptsetup refuses them with the dumps).
    {"refresh", 0, nullptr, Kind::NoOp, "no device-mapper device is made"},
    {"shared", 0, nullptr, Kind::NoOp, "no device-mapper device is made"},
    {"iv-large-sectors", 0, nullptr, Kind::NoOp, "plain mode only; the header sets the IVs"},
    {"key-size", 's', "BITS", Kind::NoOp, "the header sets the key size"},
    {"key-slot", 'S', "N", Kind::NoOp, "one key slot format only"},
    {"device-size", 0, "BYTES", Kind::Refused, "not supported for this format (the header sets the size)"},
    {"size", 'b', "SECTORS", Kind::Refused, "not supported for this format (the header sets the size)"},
    {"readonly", 'r', nullptr, Kind::Alias, "read-only"},
    {"dump-master-key", 0, nullptr, Kind::Alias, "dump-volume-key"},
    {"master-key-file", 0, "FILE", Kind::Alias, "volume-key-file"},
    {"header", 0, "FILE", Kind::Refused, "a detached header is not supported for this format"},
    {"keyfile-offset", 0, "BYTES", Kind::Refused, "not supported for this format's key files"},
    {"keyfile-size", 'l', "BYTES", Kind::Refused, "not supported for this format's key files"},
    {"volume-key-file", 0, "FILE", Kind::Refused, "opening with a volume key is not supported for this format"},
};

bool has_long(const po::options_description& o, const std::string& name) {
    return o.find_nothrow(name, false, false, false) != nullptr;
}
bool has_short(const po::options_description& o, char c) {
    return o.find_nothrow(std::string("-") + c, false, false, false) != nullptr;
}

}  // namespace

void add_cryptsetup_options(CommandLine& cl, const std::string& type) {
    // batch-mode and verbose are global in cryptsetup: where a command has
    // them for some actions only, every action takes them (a no-op there).
    for (const char* global : {"batch-mode", "verbose"}) cl.scopes.erase(global);

    po::options_description group("cryptsetup's options (accepted as cryptsetup accepts them; see "
                                  "docs/cryptsetup-options.md)");
    auto add = [&](const Compat& c, const std::string& help, po::value_semantic* sem) {
        std::string spec = c.name;
        if (c.short_name && !has_short(cl.options, c.short_name)) spec += std::string(",") + c.short_name;
        group.add_options()(spec.c_str(), sem, help.c_str());
    };
    for (const Compat& entry : kCompat) {
        const std::string name = entry.name;
        if (has_long(cl.options, name)) continue;
        Compat c = entry;
        if (c.kind == Kind::Alias && !has_long(cl.options, c.text)) {
            // We lack what it names too: it is treated as that option is here.
            const auto t = std::find_if(std::begin(kCompat), std::end(kCompat),
                                        [&](const Compat& o) { return std::string(o.name) == c.text; });
            if (t == std::end(kCompat)) continue;
            c.kind = t->kind;
            c.text = t->text;
        }
        if (c.kind == Kind::Alias) {
            const std::string target = c.text;
            cl.aliases["--" + name] = "--" + target;
            if (c.short_name && !has_short(cl.options, c.short_name))
                cl.aliases[std::string("-") + c.short_name] = "--" + target;
            if (auto s = cl.scopes.find(target); s != cl.scopes.end()) cl.scopes[name] = s->second;
            add(c, "cryptsetup's name for --" + target,
                c.arg ? static_cast<po::value_semantic*>(po::value<std::string>()->value_name(c.arg))
                      : po::bool_switch());
            continue;
        }
        if (c.kind == Kind::Refused) {
            const std::string why = c.text;
            add(c, std::string("refused: ") + why,
                po::value<std::string>()->value_name(c.arg)->notifier([name, why](const std::string&) {
                    throw UsageError("--" + name + ": " + why);
                }));
            continue;
        }
        const std::string help = std::string("no effect: ") + c.text;
        if (!c.arg) add(c, help, po::bool_switch());
        else add(c, help, po::value<std::string>()->value_name(c.arg));
    }
    // --type names this command's format, as with cryptsetup open --type.
    if (!has_long(cl.options, "type")) {
        group.add_options()(
            has_short(cl.options, 'M') ? "type" : "type,M", po::value<std::string>()->value_name(type == "luks" ? "luks|luks1|luks2" : type)->notifier(
                [type](const std::string& v) {
                    const bool ok = v == type || (type == "luks" && (v == "luks1" || v == "luks2"));
                    if (!ok) throw UsageError("--type " + v + ": this command reads " + type + " only");
                }),
            ("the format, as cryptsetup open --type names it: " + type + " only").c_str());
    }
    if (!has_long(cl.options, "test-args"))
        group.add_options()("test-args", po::bool_switch(), "check the command line, then exit 0 without running");
    cl.options.add(group);
}

}  // namespace cli
