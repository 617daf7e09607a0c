// blkcrypt selftest: re-runs the full known-answer tests of the named
// algorithms (every registered one when none are named).
#include "commands.hpp"

#include <blkcrypt/registry.hpp>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

namespace cli {

int run_selftest(Args args) {
    CommandLine cl{"blkcrypt selftest [NAME...]",
                   "Run the full self-tests of the named algorithms (generic or driver names;\n"
                   "template instances such as cbc(aes) are built first), or of every\n"
                   "registered algorithm. Exits 1 if any test fails or a name is unknown."};
    cl.hidden.add_options()("name", po::value<std::vector<std::string>>(), "algorithm names");
    cl.positional.add("name", -1);
    auto vm = parse_command_line(cl, args);
    if (!vm) return 0;
    const auto requested =
        vm->count("name") ? (*vm)["name"].as<std::vector<std::string>>() : std::vector<std::string>{};

    blkcrypt::Registry& reg = registry();

    // Look each name up first so that template instances get built; an
    // instance that failed while being built is still tested (and reported) below.
    std::vector<std::string> names, missing;
    for (const auto& name : requested) {
        names.push_back(name);
        if (auto alg = reg.lookup_any(name); !alg) {
            std::cout << "FAIL  " << name << ": " << alg.error().message << '\n';
            missing.push_back(name);
        }
    }

    int passed = 0, failed = 0, untested = 0;
    const auto results = reg.run_selftests(names);
    for (const auto& st : results) {
        const std::string who = st.info.driver + " (" + st.info.name + ")";
        switch (st.selftest) {
        case blkcrypt::SelftestState::Passed:
            ++passed;
            std::cout << "PASS  " << who << ": " << st.selftest_message << '\n';
            break;
        case blkcrypt::SelftestState::Failed:
            ++failed;
            std::cout << "FAIL  " << who << ": " << st.selftest_message << '\n';
            break;
        default:
            ++untested;
            std::cout << "SKIP  " << who << ": untested";
            if (!st.selftest_message.empty()) std::cout << " (" << st.selftest_message << ")";
            std::cout << '\n';
        }
    }
    // A name counts as a failure unless the run above already reported it.
    for (const auto& name : missing) {
        const bool reported = std::any_of(results.begin(), results.end(), [&](const auto& st) {
            return st.info.name == name || st.info.driver == name;
        });
        if (!reported) ++failed;
    }
    std::cout << passed << " passed, " << failed << " failed, " << untested << " untested\n";
    return failed || !missing.empty() ? 1 : 0;
}

}  // namespace cli
