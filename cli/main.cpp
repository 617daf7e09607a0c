// blkcrypt: dispatches the first word to a command and maps exceptions to exit
// codes (docs/exit-status.md: 0 ok, 1 operational failure, 2 usage error,
// 128+N killed by signal N; verity verify mirrors veritysetup).
#include "commands.hpp"
#include "docgen.hpp"
#include "output_file.hpp"
#include "registry.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

namespace {

struct Command {
    std::string_view name;
    std::string_view summary;
    int (*run)(cli::Args);
};

constexpr Command kCommands[] = {
    {"list", "show every registered algorithm, like /proc/crypto", cli::run_list},
    {"selftest", "run the known-answer tests of algorithms", cli::run_selftest},
    {"hash", "print the digest of files, like sha256sum", cli::run_hash},
    {"skcipher", "encrypt or decrypt with a symmetric cipher", cli::run_skcipher},
    {"aead", "encrypt or decrypt with authenticated encryption", cli::run_aead},
    {"crypt", "encrypt or decrypt an image as dm-crypt does", cli::run_crypt},
    {"verity", "build, check and read dm-verity hash trees", cli::run_verity},
    {"fsverity", "compute fs-verity file digests", cli::run_fsverity},
    {"integrity", "format, read, write and serve dm-integrity devices as integritysetup does, without root", cli::run_integrity},
    {"serve", "serve an image, or a container's plaintext, to NBD clients (nbdcopy, qemu-img, nbdfuse)", cli::run_serve},
    {"open", "unlock a container of any format and serve it, as cryptsetup open", cli::run_open},
    {"dump", "print a container's metadata, whatever its format", cli::run_dump_detected},
    {"test-passphrase", "check a secret against a container of any format", cli::run_test_passphrase_detected},
    {"decrypt", "write a container's plaintext to a file, whatever its format", cli::run_decrypt_detected},
    {"table", "print the dm table cryptsetup open loads for a container", cli::run_table_detected},
    {"bench", "measure cipher and hash throughput, like cryptsetup benchmark", cli::run_bench},
    {"luks", "read LUKS containers as cryptsetup does, without root", cli::run_luks},
    {"reencrypt", "re-key, encrypt or decrypt a LUKS image in place, resumable by cryptsetup", cli::run_reencrypt},
    {"repair", "recover an interrupted reencryption, as cryptsetup repair", cli::run_repair},
    {"tcrypt", "read TrueCrypt/VeraCrypt volumes as cryptsetup does, without root", cli::run_tcrypt},
    {"bitlk", "read BitLocker volumes as cryptsetup does, without root", cli::run_bitlk},
    {"loopaes", "read and write loop-AES volumes as cryptsetup loopaesOpen maps them, without root", cli::run_loopaes},
    {"fvault2", "read FileVault 2 volumes as cryptsetup does, without root", cli::run_fvault2},
};

// cryptsetup's action names, accepted at the top level: `blkcrypt luksDump
// IMG` is `blkcrypt luks dump IMG`.
struct Alias {
    std::string_view name, command, action;
};

constexpr Alias kAliases[] = {
    {"luksFormat", "luks", "format"},
    {"luksDump", "luks", "dump"},
    {"luksAddKey", "luks", "add-key"},
    {"luksChangeKey", "luks", "change-key"},
    {"luksRemoveKey", "luks", "remove-key"},
    {"luksKillSlot", "luks", "kill-slot"},
    {"luksErase", "luks", "erase"},
    {"luksHeaderBackup", "luks", "header-backup"},
    {"luksHeaderRestore", "luks", "header-restore"},
    {"luksUUID", "luks", "uuid"},
    {"isLuks", "luks", "is-luks"},
    {"convert", "luks", "convert"},
    {"config", "luks", "config"},
    {"token", "luks", "token"},
    {"tcryptDump", "tcrypt", "dump"},
    {"bitlkDump", "bitlk", "dump"},
    {"fvault2Dump", "fvault2", "dump"},
    // cryptsetup's per-type open actions: open with the type named.
    {"luksOpen", "open", "--type=luks"},
    {"plainOpen", "open", "--type=plain"},
    {"loopaesOpen", "open", "--type=loopaes"},
    {"tcryptOpen", "open", "--type=tcrypt"},
    {"bitlkOpen", "open", "--type=bitlk"},
    {"fvault2Open", "open", "--type=fvault2"},
};

void print_help() {
    std::cout << "Usage: blkcrypt [--plugin PATH]... COMMAND [OPTIONS...]\n"
                 "       blkcrypt --help | --version\n\n"
                 "--plugin PATH loads a plugin (repeatable, any position); so do the *.so files\n"
                 "in the directories of BLKCRYPT_PLUGIN_PATH (colon-separated) and, unless\n"
                 "BLKCRYPT_NO_DEFAULT_PLUGINS=1, in the default plugin directory:\n"
                 "  " << (cli::default_plugin_dir().empty() ? "(disabled)" : cli::default_plugin_dir()) << "\n\n"
                 "Commands:\n";
    std::size_t width = 10;
    for (const auto& c : kCommands) width = std::max(width, c.name.size() + 2);
    for (const auto& c : kCommands) {
        std::string name(c.name);
        name.resize(width, ' ');
        std::cout << "  " << name << c.summary << "\n";
    }
    std::cout << "\ncryptsetup's names for the same actions:\n";
    for (const auto& a : kAliases) {
        std::string name(a.name);
        name.resize(19, ' ');
        std::cout << "  " << name << "blkcrypt " << a.command << " " << a.action << "\n";
    }
    std::cout << "\nRun 'blkcrypt COMMAND --help' for the options of a command.\n";
}

// Exactly one line on stderr, whatever the message contains.
void report(std::string_view msg) {
    std::string line(msg);
    std::replace(line.begin(), line.end(), '\n', ' ');
    std::cout.flush();
    std::fprintf(stderr, "blkcrypt: %s\n", line.c_str());
}

int dispatch(const std::vector<std::string>& words) {
    if (words.empty()) throw cli::UsageError("no command given (see blkcrypt --help)");
    const std::string& first = words[0];
    if (first == "--help" || first == "-h" || first == "help") {
        if (words.size() > 1 && first == "help") {
            const std::vector<std::string> help = {"--help"};
            for (const auto& c : kCommands)
                if (c.name == words[1]) return c.run(help);
            // `help luksFormat` is `luksFormat --help`: the action's help.
            for (const auto& a : kAliases)
                if (a.name == words[1]) return dispatch({words[1], "--help"});
            throw cli::UsageError("unknown command '" + words[1] + "' (see blkcrypt --help)");
        }
        print_help();
        return 0;
    }
    // Hidden: the build makes the man pages and the completion with these.
    if (first == "--generate-man" || first == "--generate-bash-completion") {
        if (words.size() != 2) throw cli::UsageError(first + " takes one path");
        std::vector<cli::CommandDoc> docs;
        for (const auto& c : kCommands) {
            std::vector<std::string> sub;
            if (c.name == "fsverity") sub = {"digest"};  // its one subcommand holds the options
            docs.push_back({std::string(c.name), std::string(c.summary), cli::describe_command(c.run, sub)});
        }
        if (first == "--generate-man") {
            // fsverity's other subcommands have option tables of their own: a page each.
            const auto fsverity = std::find_if(std::begin(kCommands), std::end(kCommands),
                                               [](const Command& c) { return c.name == std::string_view("fsverity"); });
            docs.push_back({"fsverity-sign", "sign a file's fs-verity digest as 'fsverity sign' does",
                            cli::describe_command(fsverity->run, {"sign"})});
            docs.push_back({"fsverity-verify-sig", "check a built-in fs-verity signature of a file",
                            cli::describe_command(fsverity->run, {"verify-sig"})});
            cli::write_man_pages(docs, words[1]);
        } else {
            std::vector<cli::CommandAlias> aliases;
            for (const auto& a : kAliases)
                aliases.push_back({std::string(a.name), std::string(a.command), std::string(a.action)});
            const std::string text = cli::bash_completion(docs, aliases);
            cli::write_output(words[1], blkcrypt::ConstBytes(reinterpret_cast<const uint8_t*>(text.data()), text.size()),
                              cli::OutputOptions{.role = "the completion script"});
        }
        return 0;
    }
    if (first == "--version") {
        std::cout << "blkcrypt " BLKCRYPT_VERSION "\n";
        return 0;
    }
    for (const auto& c : kCommands)
        if (c.name == first) return c.run(cli::Args(words).subspan(1));
    for (const auto& a : kAliases) {
        if (a.name != first) continue;
        std::vector<std::string> rest{std::string(a.action)};
        rest.insert(rest.end(), words.begin() + 1, words.end());
        for (const auto& c : kCommands)
            if (c.name == a.command) return c.run(rest);
    }
    throw cli::UsageError("unknown command '" + first + "' (see blkcrypt --help)");
}

}  // namespace

int main(int argc, char** argv) {
    // Nothing should get here; if something does, one line instead of
    // libstdc++'s "terminate called ..." (still abort(): a crash stays one).
    std::set_terminate([] {
        std::fputs("blkcrypt: internal error: unexpected termination\n", stderr);
        std::abort();
    });
    try {
        const auto words = cli::take_plugin_options(std::vector<std::string>(argv + 1, argv + argc));
        const int rc = dispatch(words);
        if (!std::cout.flush()) throw cli::Failure("stdout: write error");
        return rc;
    } catch (const cli::UsageError& e) {
        report(e.what());
        return 2;
    } catch (const cli::StatusFailure& e) {
        report(e.what());
        return e.status();
    } catch (const std::bad_alloc&) {  // its what() is "std::bad_alloc"
        report("out of memory");
        return 1;
    } catch (const std::exception& e) {  // cli::Failure, I/O
        report(e.what());
        return 1;
    }
}
