#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "util/dotenv.hpp"

TEST_CASE(".env sets unset variables and never overrides the environment", "[env]") {
  const std::string path = (std::filesystem::temp_directory_path() / "kagent-dotenv-test.env").string();
  {
    std::ofstream f(path);
    f << "# comment\n"
         "export KAGENT_T_A=alpha\n"
         "KAGENT_T_B=\"quoted value\"\n"
         "KAGENT_T_C=plain # trailing comment\n"
         "KAGENT_T_KEEP=from-file\n"
         "not a line\n";
  }
  unsetenv("KAGENT_T_A");
  unsetenv("KAGENT_T_B");
  unsetenv("KAGENT_T_C");
  setenv("KAGENT_T_KEEP", "from-env", 1);
  REQUIRE(kagent::load_dotenv(path) == 3);
  REQUIRE(std::string(std::getenv("KAGENT_T_A")) == "alpha");
  REQUIRE(std::string(std::getenv("KAGENT_T_B")) == "quoted value");
  REQUIRE(std::string(std::getenv("KAGENT_T_C")) == "plain");
  REQUIRE(std::string(std::getenv("KAGENT_T_KEEP")) == "from-env");
  REQUIRE(kagent::dotenv_overridden().at("KAGENT_T_KEEP") == "from-file");  // a secret all the same
  REQUIRE(kagent::dotenv_overridden().count("KAGENT_T_A") == 0);
  REQUIRE(kagent::load_dotenv("/nonexistent/.env") == -1);
  std::filesystem::remove(path);
}
