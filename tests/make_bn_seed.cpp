// make_bn_seed OUTDIR: writes the seed scenario of the PyTorch report for `foldcheck
// diagnose` (see diagnose_scenarios.hpp): x.npy (1x3x224x224), bn.npz (trained running
// statistics; bn_fresh.npz a fresh BatchNorm), y_train.npy / y_train_fresh.npy
// (training-mode outputs), y_eval.npy (a correct eval-mode output), y_eps1e-3.npy.
#include <filesystem>
#include <iostream>

#include "diagnose_scenarios.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_bn_seed OUTDIR\n";
    return 2;
  }
  const std::filesystem::path d = argv[1];
  std::filesystem::create_directories(d);
  const auto trained = scenarios::make_bn_scenario(true);
  const auto fresh = scenarios::make_bn_scenario(false);
  foldcheck::write_npy((d / "x.npy").string(), trained.x);
  scenarios::write_bn_npz((d / "bn.npz").string(), trained.bn);
  scenarios::write_bn_npz((d / "bn_fresh.npz").string(), fresh.bn);
  foldcheck::write_npy((d / "y_train.npy").string(), scenarios::bn_output(trained, true, trained.bn.eps));
  foldcheck::write_npy((d / "y_train_fresh.npy").string(), scenarios::bn_output(fresh, true, fresh.bn.eps));
  foldcheck::write_npy((d / "y_eval.npy").string(), scenarios::bn_output(trained, false, trained.bn.eps));
  foldcheck::write_npy((d / "y_eps1e-3.npy").string(), scenarios::bn_output(trained, false, 1e-3));
  std::cout << "wrote " << d.string() << "/{x.npy, bn.npz, bn_fresh.npz, y_train.npy, y_train_fresh.npy, y_eval.npy, y_eps1e-3.npy}\n";
  return 0;
}
