//===- medrun.cpp - the med runtime driver ---------------------------------------===//
//
//   medrun train RECIPE.yaml [--set key=value]... [--steps N] [--fold F] [--out DIR] [--resume [CKPT]]
//   medrun bench RECIPE.yaml [--set key=value]... [--steps N] [--warmup W] [--json FILE]
//   medrun augment-preview RECIPE.yaml [--set key=value]... [--samples N] [--step S] [--out DIR]
//   medrun info X.medc
//   medrun init X.medc -o params.safetensors [--seed S]
//   medrun run X.medc --func NAME [--input [NAME=]FILE.npy]... [--params FILE|CHECKPOINT]
//              [--weights model|ema] [--out DIR] [--precision f32|f64|bf16|f16] [--seed S]
//              [--threads N] [--device cpu|cuda]
//   medrun cuda-check X.medc --func NAME [--input ...] [--params P] [--repeat N] [--tolerance T]
//   medrun infer X.medc --image VOLUME... -o OUT --params CKPT [--weights model|ema]
//                [--overlap F] [--mirror] [--activation A] [--device cpu|cuda]
//                [--spacing Z,Y,X] [--block D,H,W] [--memory MIB] [--chunk D,H,W]
//   medrun eval PRED --labels LABELS [--skeletons FILE] [--mode M] [--method M] [--offsets O]
//               [--block B] [--tune [--thresholds T,...] [--select nerl|voi] [--save-params FILE]
//               [--run DIR] | --params FILE | --run DIR] [--min-size N] [--json FILE] [-o OUT]
//   medrun volume PATH [--channel C] [--box Z,Y,X:D,H,W] [-o OUT] [--json]
//   medrun segment AFFS -o SEG [--method watershed|mean-agglomeration|mutex] [--threshold T,...]
//                  [--offsets O | --run DIR] [--params FILE] [--block B [--scratch DIR]]
//                  [--seed-threshold S] [--low L] [--min-seed-size N] [--stride Z,Y,X]
//   medrun export RUN_OR_CHECKPOINT -o MODEL.safetensors|.pt [--weights ema|model] [--which last|best]
//   medrun dist-check [--gpus N] [--count N] [--iterations N] [--pause MS]
//   medrun COMMAND --help, medrun --version
//
//===----------------------------------------------------------------------------------===//
#include "medrun/AdamDrift.h"
#include "medrun/AugmentPreview.h"
#include "medrun/Artifact.h"
#include "medrun/Checkpoint.h"
#include "medrun/Cuda.h"
#include "medrun/Distributed.h"
#include "medrun/Error.h"
#include "medrun/Executor.h"
#include "medrun/Flops.h"
#include "medrun/GpuLibraries.h"
#include "medrun/Npy.h"
#include "medrun/Parallel.h"
#include "medrun/Safetensors.h"
#include "medrun/Interop.h"
#include "BenchCommand.h"
#include "CommandArgs.h"
#include "CudaCheckCommand.h"
#include "ExportCommand.h"
#include "SegmentCommand.h"
#include "TrainCommand.h"
#include "InferCommand.h"
#include "EvalCommand.h"
#include "PlanCommand.h"
#include "PredictCommand.h"
#include "PreprocessCommand.h"
#include "VolumeCommand.h"
#include "Version.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <random>
#include <cmath>
#include <memory>
#include <optional>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

using namespace medrun;

namespace {

const Option kThreads{"threads", "N", "CPU threads (default: all cores, or MEDRUN_THREADS)"};
const Option kSeed{"seed", "S", "seed for initialized parameters (default 0)"};
const Option kFunc{"func", "NAME", "function to run (default: the only one in the artifact)"};
const Option kInput{"input", "[NAME=]F",
                    "a .npy file for the input NAME (`image`, `target`, `lr`, ... as\n"
                    "`medrun info` lists them, or argN; without NAME=, inputs in order), or a\n"
                    "number for a scalar argument (learning rate, step, ...)"};
const Option kParams{"params", "P",
                     "parameters from a safetensors file, or from a training checkpoint: a\n"
                     "step directory (DIR/checkpoints/step_N), a checkpoints directory or its\n"
                     "latest/best pointer. Only those the function reads are needed; optimizer\n"
                     "and EMA state the artifact does not declare is ignored (default:\n"
                     "initialized with --seed)"};
const Option kWeights{"weights", "W",
                      "model (default) or ema: each parameter the function reads takes its\n"
                      "EMA value from --params (ema.<name>; a checkpoint's ema.safetensors)"};
const Option kProfile{"profile", "", "print the time spent in each op kind"};
const Option kSet{"set", "K=V",
                  "override a recipe key, e.g. --set data.batch=1 --set data.patch=32,32,32\n"
                  "(`medc recipe RECIPE` prints every key with its value)"};
const Option kRecipeDevice{"device", "D",
                           "train.device: cpu, cuda or auto (default: the GPU when a CUDA driver\n"
                           "and GPU are present, else the CPU); cuda compiles with --target cuda"};
const Option kArtifact{"artifact", "A",
                       "use A, compiled from the recipe before (`medc compile --recipe R\n"
                       "[--target cuda]`); RECIPE may then be the JSON `medc recipe` prints,\n"
                       "so a machine without the compiler runs it (the GPU machine)"};
const Option kRecipeThreads{"threads", "N", "train.threads: CPU threads (default: all cores)"};
const Option kInitFrom{"init-from", "W",
                       "start from the weights in W: a state_dict of MedNeXt v1 (safetensors,\n"
                       "e.g. from `medrun export`, or a PyTorch .pth/.pt zip file, read without\n"
                       "running its pickle code). Keys and shapes must match the model exactly;\n"
                       "dummy_tensor is ignored. Optimizer state starts fresh, EMA weights as W.\n"
                       "With --resume-or-start only when the run starts (not when it resumes)"};
const Option kUpkern{"upkern", "",
                     "with --init-from: kernels of another size (kernel 3 weights, kernel 5\n"
                     "model) are resized by trilinear interpolation, as MedNeXt's UpKern"};

const Option kGpus{"gpus", "N",
                   "start N ranks on this host, one per GPU, as torchrun would\n"
                   "(docs/distributed.md); a failing rank stops them all"};

const std::vector<Command> &commands() {
  static const std::vector<Command> table = {
      {"train",
       "medrun train RECIPE.yaml [--set key=value]... [--steps N] [--fold F] [--out DIR] [--resume [CKPT]]\n"
       "             [--resume-or-start] [--overwrite] [--device cpu|cuda|auto] [--nan stop|skip]\n"
       "             [--threads N] [--progress P] [--artifact A] [--init-from W [--upkern]]",
       "Trains the recipe (configs/*.yaml) on its data (data.source: the embedded synthetic\n"
       "volumes, volume files listed in the recipe, or an nnU-Net raw dataset folder; the\n"
       "split is written to DIR/split.json): compiles it with\n"
       "medc unless the compiled step is cached, then runs the training loop with logs\n"
       "(metrics.jsonl, tensorboard/) and checkpoints (checkpoints/step_N/) in DIR\n"
       "(default: runs/<recipe name>), which one run at a time may use (a lock file).\n"
       "Ctrl-C (SIGINT) finishes the step, saves a checkpoint and exits with status 130;\n"
       "SIGTERM does the same and exits with 0 (a scheduler that requeues sees a clean end);\n"
       "a second signal quits at once (130). Each option but --resume, --resume-or-start,\n"
       "--overwrite, --artifact, --progress, --init-from and --upkern is a shorthand for a --set.",
       {kSet,
        {"steps", "N", "train.steps: steps of the whole run (a resumed run continues to N)"},
        {"fold", "F", "data.fold: a fold of the dataset's splits, or all (every case, as\n"
                      "nnU-Net's fold all)"},
        {"out", "DIR", "train.out: where logs, checkpoints and config.json go"},
        {"resume", "[CKPT]",
         "continue from the latest checkpoint in DIR/checkpoints, or from CKPT (a\n"
         "step directory, a checkpoints directory or its latest/best pointer);\n"
         "the continuation is bit-identical to an uninterrupted run. Without a\n"
         "complete checkpoint in DIR (none yet, or a save that did not finish),\n"
         "or with the run at train.steps already, it is an error. A newer checkpoint\n"
         "passed over (incomplete) is named on stderr and in metrics.jsonl"},
        {"resume-or-start", "",
         "continue from the latest checkpoint in DIR/checkpoints, or start at step\n"
         "0 if there is none (for a job script that is requeued); a finished run\n"
         "exits 0 saying so"},
        {"overwrite", "", "start over in a DIR that holds a run (its checkpoints and logs go)"},
        kRecipeDevice,
        kArtifact,
        {"nan", "P", "train.nan: stop (default) at a non-finite loss, or skip such steps"},
        kRecipeThreads,
        {"progress", "P", "auto (a bar on a terminal, plain lines otherwise), bar or lines"},
        kInitFrom,
        kUpkern,
        kGpus,
        {"data-parallel", "",
         "train through the data-parallel path even as a job of one rank (NCCL with a\n"
         "communicator of one; the artifact compiled with --data-parallel): that path\n"
         "checked on one GPU"}},
       true},
      {"bench",
       "medrun bench RECIPE.yaml [--set key=value]... [--artifact A] [--device cpu|cuda|auto]\n"
       "             [--steps N] [--warmup W] [--threads N] [--json FILE] [--roofline GBPS,TFLOPS]\n"
       "             [--gpus N | --data-parallel]",
       "Times the recipe's training step: prepares it as `train` does (compile cache,\n"
       "--artifact, --device), takes one batch of the synthetic data, runs W warm-up steps\n"
       "(default 3) and N timed steps (default 20), parameters updated as in training, and one\n"
       "more step profiled by op kind. Prints the median, min and max ms/step, TFLOP/s (FLOPs\n"
       "counted as `medc stats` counts them), GB/s (every operand and result read or written\n"
       "once), peak memory (GPU: arena + resident state; CPU: the process's max resident set)\n"
       "and the time by op kind, each kind's GB/s and TFLOP/s also as shares of the\n"
       "roofline (on an H200 its measured copy bandwidth and bf16 matrix-product rate);\n"
       "--json FILE writes the numbers for scripts. In a job of several ranks (--gpus N, or a\n"
       "launcher's variables) or with --data-parallel, it times the data-parallel step and\n"
       "also reports its communication: all-reduce time and the part of it the step waits\n"
       "for (exposed), with every rank's ms/step and peak memory (docs/distributed.md).",
       {kSet,
        kArtifact,
        kRecipeDevice,
        {"steps", "N", "timed steps (default 20)"},
        {"warmup", "W", "warm-up steps before them (default 3)"},
        kRecipeThreads,
        {"json", "FILE", "also write the numbers as JSON to FILE"},
        {"roofline", "GBPS,TFLOPS",
         "the bounds the time by op kind is measured against (default: 4300,790 on an H200,\n"
         "                     else none; `none`: no roofline columns)"},
        kGpus,
        {"data-parallel", "",
         "time the data-parallel step even as a job of one rank (NCCL with a communicator\n"
         "of one; the artifact compiled with --data-parallel)"}},
       true},
      {"augment-preview",
       "medrun augment-preview RECIPE.yaml [--set key=value]... [--artifact A] [--samples N]\n"
       "             [--step S] [--out DIR] [--device cpu|cuda|auto]",
       "Shows what the recipe's augmentation pipeline (augment: in the recipe, the artifact's\n"
       "@augment, docs/augment.md) makes of the batches training takes: prepares the recipe\n"
       "as `train` does (compile cache, --artifact, --device), takes the batches of steps S,\n"
       "S+1, ... from the same loader with the same keys (train.seed, rank 0) until N\n"
       "samples, runs @augment on them and writes, per sample (P = DIR/step<S>_sample<b>):\n"
       "P_raw.png and P_augmented.png, the centre slice along each axis (D, H, W) side by\n"
       "side, grey levels scaled by the sample's min and max, labels alpha-blended over it\n"
       "(raw: instances or classes in a fixed palette; augmented: class indices likewise,\n"
       "or for affinity targets red where a short-range affinity is 0: boundaries and\n"
       "background); P_raw_image.npy, P_raw_seg.npy and P_<output>.npy for each output of\n"
       "@augment (image, target, mask, target.<i>), each [1, ...]; and DIR/samples.jsonl,\n"
       "a line per sample (step, sample, key, shapes, value ranges), also printed; and\n"
       "DIR/step<S>_rng.npy, the step's key. `medrun run A --func augment --input image=...\n"
       "--input seg=... --input rng=DIR/step<S>_rng.npy` on a step's samples stacked into\n"
       "its batch gives the same volumes (docs/training.md).",
       {kSet,
        kArtifact,
        {"samples", "N", "samples to draw (default 4)"},
        {"step", "S", "the first training step whose batch is taken (default 0)"},
        {"out", "DIR",
         "output directory (default: <train.out or runs/<recipe name>>/augment-preview)"},
        kRecipeDevice},
       true},
      {"plan",
       "medrun plan DATASET [-o DIR] [--gpu-memory GB] [--nnunet-plans P] [--threads N]\n"
       "            [--progress P]",
       "nnU-Net's dataset fingerprint and 3d_fullres plan of an nnU-Net raw dataset folder\n"
       "(dataset.json, imagesTr/CASE_XXXX, labelsTr/CASE), as nnUNetv2_plan_and_preprocess\n"
       "makes them: per case (on all cores, with progress) the spacing, the shape after\n"
       "cropping to the non-zero region and the foreground intensities of each channel;\n"
       "then the target spacing (the median; the 10th percentile of a strongly anisotropic\n"
       "axis), the transpose, the patch and batch for the GPU memory target, the network's\n"
       "strides and kernels, the normalisation per channel name and the non-zero mask.\n"
       "Writes DIR/dataset_fingerprint.json and DIR/nnUNetPlans.json (default DIR: DATASET)\n"
       "in nnU-Net's format.",
       {{"o", "DIR", "where the JSON files go (default: the dataset folder)"},
        {"gpu-memory", "GB", "the GPU memory target of the plan (default 8, nnU-Net's)"},
        {"nnunet-plans", "P",
         "take nnU-Net's own nnUNetPlans.json instead (checked against the dataset:\n"
         "3d_fullres, one normalisation per channel, CT statistics), written to DIR"},
        kThreads,
        {"progress", "P", "auto (a bar on a terminal, plain lines otherwise), bar or lines"}},
       false},
      {"preprocess", "medrun preprocess DATASET -o DIR [--plans P] [--threads N] [--progress P]",
       "nnU-Net's preprocessing of every training case by the plan's 3d_fullres\n"
       "configuration (nnUNetPlans.json from `medrun plan` or nnU-Net): transpose, crop to\n"
       "the non-zero region (label 0 outside it becomes -1), normalise each channel, resample\n"
       "to the target spacing (images third order, labels through their masks, a separate z\n"
       "axis when anisotropic), on all cores with progress. Writes DIR/CASE.zarr/data_XXXX\n"
       "and seg (64^3 zlib chunks) and DIR/CASE.json (nnU-Net's properties); cases whose\n"
       "files and plan did not change since the last run are kept.",
       {{"o", "DIR", "the cache folder"},
        {"plans", "P", "the plan (default: DATASET/nnUNetPlans.json)"},
        kThreads,
        {"progress", "P", "auto (a bar on a terminal, plain lines otherwise), bar or lines"}},
       false},
      {"predict",
       "medrun predict INPUT_FOLDER -o OUT_FOLDER --run RUN [--run RUN]... --artifact X.medc\n"
       "               [--plans P] [--weights ema|model] [--mirror] [--overlap F]\n"
       "               [--save-probabilities] [--progress P]",
       "nnU-Net's prediction of a folder of raw cases (CASE_XXXX.nii.gz, one file per\n"
       "channel) with runs trained on a `medrun preprocess` cache, one run per fold: each\n"
       "case preprocessed by the runs' plan as in training, the sliding window of every\n"
       "run's checkpoints/best, the logits averaged over the folds, resampled back to the\n"
       "cropped shape (order 1, a separate z axis when anisotropic), the argmax put back\n"
       "into the uncropped volume and written as OUT_FOLDER/CASE.nii.gz with the input's\n"
       "geometry, uint8 (uint16 past 254 classes); progress and throughput printed.",
       {{"o", "DIR", "the output folder"},
        {"run", "RUN", "a training run's directory, or its `medrun export` file (once per fold)"},
        {"artifact", "A", "the runs' compiled recipe (`medc compile --recipe R`): its `infer`"},
        {"plans", "P", "the plan (default: the one the runs' data contract names)"},
        {"weights", "W", "ema or model (default: ema where the checkpoints have EMA weights)"},
        {"mirror", "", "test-time augmentation: average the 8 flips of the spatial axes"},
        {"overlap", "F", "fraction of a window its neighbours share, in [0, 1) (default 0.5)"},
        {"save-probabilities", "",
         "also OUT_FOLDER/CASE.npz as nnU-Net writes it: key probabilities, float32\n"
         "(classes, z, y, x), the softmax of the averaged logits, background 1 outside the crop"},
        {"progress", "P", "auto (a bar on a terminal, plain lines otherwise), bar or lines"}},
       false},
      {"volume", "medrun volume PATH [--channel C] [--box Z,Y,X:D,H,W] [-o OUT] [--json]",
       "Shows how medrun reads a volume file: format, shape (z, y, x), element type, spacing,\n"
       "chunks and affine. PATH is a file (.nii, .nii.gz, .npy) or a container and the\n"
       "array in it: FILE.h5/KEY (HDF5; the first dataset without KEY), DIR.zarr/KEY\n"
       "(Zarr v2). With -o, writes the volume, or the box at corner Z,Y,X of size D,H,W,\n"
       "to OUT in any of these formats (float32, or int64 for integer volumes; spacing and\n"
       "affine kept): a converter, and a way to see a patch as training reads it.",
       {{"channel", "C",
         "channel C of a C x D x H x W array (predictions: `medrun infer` writes the\n"
         "channels first; NIfTI: dim[4])"},
        {"box", "Z,Y,X:D,H,W", "with -o: write only this box (corner and size, voxels; inside the volume)"},
        {"o", "OUT", "write the volume (or box) to OUT (.nii[.gz], .npy, FILE.h5/KEY, DIR.zarr/KEY)"},
        {"json", "", "print the description as one JSON object"}},
       false},
      {"infer",
       "medrun infer X.medc --image VOLUME [--image VOLUME]... -o OUT --params P\n"
       "             [--weights model|ema] [--overlap F] [--mirror] [--activation A]\n"
       "             [--normalization N] [--device cpu|cuda] [--threads N] [--progress P]\n"
       "             [--spacing Z,Y,X] [--block D,H,W] [--memory MIB] [--chunk D,H,W]",
       "Predicts a whole volume with the `infer` function of a recipe's artifact (`medc\n"
       "compile --recipe R [--target cuda]`): windows of the recipe's patch step over the\n"
       "volume with an overlap, the last ones aligned to its end (a volume smaller than the\n"
       "window is padded), the recipe's batch of windows per run, and the predictions are\n"
       "blended with nnU-Net's Gaussian importance map. Writes the network's outputs\n"
       "(logits or affinities, after --activation) as float32, channel-first (C, D, H, W),\n"
       "with the input's spacing and affine (NIfTI: its header's transform; C in dim[4]).\n"
       "Into FILE.h5/KEY or DIR.zarr/KEY it goes block by block: the input is read by\n"
       "blocks with their halo, the result equals the whole volume's, host memory stays\n"
       "within --memory, and the blocks written are recorded in OUT's progress file\n"
       "(pred.zarr/affs -> pred.zarr.affs.progress.json), so a run killed and started\n"
       "again with the same settings skips them.",
       {{"image", "VOLUME",
         "the volume to predict (.nii[.gz], .npy, FILE.h5/KEY, DIR.zarr/KEY); once per\n"
         "input channel of the network, in order, all of one shape"},
        {"o", "OUT", "where the prediction goes (.nii[.gz], .npy, FILE.h5/KEY, DIR.zarr/KEY)"},
        {"params", "P",
         "the trained weights: a checkpoint (a run's checkpoints/best or latest, a step\n"
         "directory) or a safetensors file"},
        {"weights", "W",
         "ema or model (default: ema where the checkpoint has EMA weights, else model)"},
        {"overlap", "F", "fraction of a window its neighbours share, in [0, 1) (default 0.5)"},
        {"mirror", "", "test-time augmentation: average the 8 flips of the spatial axes"},
        {"activation", "A",
         "sigmoid, softmax (over channels) or none (default: sigmoid for recipes with\n"
         "a bce loss, softmax for dice_ce)"},
        {"normalization", "N",
         "replaces the run's own normalization (default: the one training used, with\n"
         "its statistics, from the checkpoint's data contract): none, divide255 or\n"
         "zscore (per volume); needed for weights without a contract (safetensors)"},
        {"device", "D", "cpu (default) or cuda (artifacts compiled with --target cuda)"},
        kThreads,
        {"progress", "P", "auto (a bar on a terminal, plain lines otherwise), bar or lines"},
        {"spacing", "Z,Y,X",
         "the input's voxel size where its file states none (a Zarr/HDF5 without a\n"
         "resolution attribute, .npy); an error if the file states another"},
        {"block", "D,H,W",
         "the block (voxels, whole --chunk sizes; N for N,N,N) (default: the largest\n"
         "that fits --memory; outputs written whole: the whole volume)"},
        {"memory", "MIB",
         "host memory for a block, its halo and the input's chunk cache (default 2048)"},
        {"chunk", "D,H,W", "the output's chunks, HDF5/Zarr (default 64,64,64)"}},
       true},
      {"eval",
       "medrun eval PRED --labels LABELS [--skeletons FILE] [--mode M] [--json FILE] [-o OUT]\n"
       "            [--tune [--thresholds T,T,...] [--min-size N] [--select nerl|voi]\n"
       "             [--save-params FILE] [--run DIR] | --params FILE | --run DIR |\n"
       "             --thresholds T] [--progress P]\n"
       "medrun eval PRED_FOLDER --labels GT_FOLDER [--dataset-json FILE] [--file-ending E]\n"
       "            [--json SUMMARY] [--progress P]",
       "Scores a prediction against ground truth. Affinities (`medrun infer` of a BANIS\n"
       "recipe: 3 or more channels, the first 3 short-range z, y, x) become instances as\n"
       "BANIS makes them: voxels joined by an affinity above a threshold are one object\n"
       "(6-connected, numbered by first voxel; a voxel joined to none is background), over\n"
       "CREMI's VOI split and merge (bits) and adapted Rand error against the instance ids\n"
       "of LABELS (ids <= 0: background, left out), and with --skeletons NISB's ERL and NERL\n"
       "(docs/skeletons.md). The threshold is never chosen on the volume scored unless\n"
       "asked: --tune sweeps it on this volume (a validation volume), picks the best\n"
       "(the highest NERL with skeletons, else the lowest VOI sum) and records it\n"
       "(--save-params, or RUN/segmentation_params.json with --run); a test volume is\n"
       "segmented with --params FILE or --run DIR: one segmentation, no sweep. Class\n"
       "scores (softmax or logits of a segmentation recipe, background first) are scored\n"
       "by their argmax: Dice and IoU per class\n"
       "against class indices (nan for a class in neither, as nnU-Net) and the mean over\n"
       "the foreground classes. An integer volume is an instance segmentation, scored as is.\n"
       "PRED and LABELS are volumes as `medrun volume` reads them (FILE.h5/KEY, DIR.zarr/KEY,\n"
       ".nii[.gz], .npy); prints a table, --json writes the numbers.\n"
       "PRED_FOLDER --labels GT_FOLDER: folders of label maps (class indices), case by\n"
       "case as nnU-Net's evaluate_predictions.py: per case and per label (or region of\n"
       "dataset.json) Dice, IoU, TP, FP, FN, TN, n_pred, n_ref, voxels of the ignore label\n"
       "left out; the mean over cases (nanmean) and the foreground mean, written to\n"
       "PRED_FOLDER/summary.json (or --json) as nnU-Net writes it.",
       {{"labels", "LABELS", "the ground truth: instance ids, or class indices (same shape)"},
        {"mode", "M",
         "auto (default: integer volume -> instances; channels summing to 1 ->\n"
         "segmentation; else 3 or more channels -> affinities), affinities,\n"
         "segmentation or instances"},
        {"skeletons", "FILE",
         "ground-truth skeletons (JSON, docs/skeletons.md): ERL, NERL and VOI on their\n"
         "nodes for instances and affinities"},
        {"tune", "",
         "affinities: sweep the threshold on this volume (a validation volume) and choose"},
        {"thresholds", "T,T,...",
         "--tune: the thresholds to sweep (default: BANIS's, the logit above k for\n"
         "k = -1..11: sigmoid(k) on probabilities, k on logits); without --tune, one\n"
         "threshold to segment with"},
        {"select", "RULE", "--tune: nerl (default with --skeletons) or voi (the lowest VOI sum)"},
        {"method", "M",
         "affinities: components (default: BANIS's connected components above the\n"
         "threshold) or mean-agglomeration (the seeded watershed's fragments merged by\n"
         "mean affinity down to the threshold, as medrun segment; --tune's default sweep\n"
         "0.1..0.9)"},
        {"block", "B",
         "mean-agglomeration: block by block as medrun segment --block B (N or Z,Y,X),\n"
         "recorded with the threshold (default: the whole volume)"},
        {"offsets", "O",
         "affinities: the channels' offsets along z, y, x (\"1,0,0;0,1,0;...\" or JSON),\n"
         "to find the short-range channels (default: --run's loss.affinities.offsets,\n"
         "else the first 3 channels are +1 along z, y, x)"},
        {"save-params", "FILE", "--tune: write the chosen parameters to FILE"},
        {"params", "FILE", "segment with the parameters --tune recorded in FILE (no sweep)"},
        {"run", "DIR",
         "a run directory: --tune records into DIR/segmentation_params.json; without\n"
         "--tune, segment with the parameters recorded there (no sweep)"},
        {"min-size", "N", "objects of fewer than N voxels become background (default 0)"},
        {"json", "FILE",
         "write the results (every threshold, the best) as JSON; folders: summary.json's\n"
         "path (default PRED_FOLDER/summary.json)"},
        {"o", "OUT",
         "write the best segmentation (the class map for segmentations) to OUT (.nii[.gz],\n"
         ".npy, FILE.h5/KEY, DIR.zarr/KEY) as uint8 below 255, else uint16 (or wider)"},
        {"dataset-json", "FILE",
         "folders: the labels, regions and ignore label to score (default: GT_FOLDER's\n"
         "dataset's dataset.json if there is one, else every label > 0 found)"},
        {"file-ending", "E", "folders: the files to score (default: dataset.json's, else .nii.gz)"},
        {"progress", "P", "auto (a bar on a terminal, plain lines otherwise), bar or lines"}},
       false},
      segmentCommandEntry(),
      {"export",
       "medrun export RUN_OR_CHECKPOINT -o MODEL.safetensors [--weights ema|model]\n"
       "              [--which last|best] [--artifact A]",
       "Writes a run's weights as the state_dict of MedNeXt v1 in PyTorch (MIC-DKFZ's\n"
       "MedNeXt, as BANIS and PyTorch Connectomics build it): our model keys, f32, plus\n"
       "its dummy_tensor, so that `model.load_state_dict(load_file(F), strict=True)`\n"
       "loads it. RUN_OR_CHECKPOINT is a run directory (runs/NAME), its checkpoints\n"
       "directory, a step directory, a latest/best pointer or a safetensors file. Checks\n"
       "the keys against MedNeXt v1's structure and the run's model (its compiled recipe,\n"
       "found in the cache by config.json, or --artifact), and prints the constructor\n"
       "call that builds the matching network (also in the file's metadata). A run of a\n"
       "network imported from ONNX gets the parameters its compiled recipe declares, named\n"
       "as the ONNX initializers (the exported network's state_dict keys); its .onnx file\n"
       "must be there and unchanged since compiling. -o X.pt or X.pth writes the state_dict\n"
       "as torch.save does (torch.load reads it); the data contract goes beside it.",
       {{"o", "FILE", "the file to write: .safetensors, or .pt/.pth for torch.load"},
        {"weights", "W", "ema or model (default: ema where the checkpoint has EMA weights)"},
        {"which", "C", "last (default) or best: the checkpoint of a run or checkpoints directory"},
        {"artifact", "A", "the run's compiled recipe, to compare the keys with its model"}},
       true},
      {"info", "medrun info X.medc",
       "Lists the artifact's functions (inputs, outputs), its parameters (name, shape,\n"
       "dtype, trainable) with a summary line, its CUDA kernels and each function's FLOPs\n"
       "and bytes (those `medrun bench` divides by the time).",
       {},
       false},
      {"init", "medrun init X.medc -o PARAMS.safetensors [--seed S] [--init-from W [--upkern]]",
       "Writes parameters initialized as PyTorch initializes each layer (state_dict keys),\n"
       "or, with --init-from, the parameters and training state a run started from W\n"
       "begins with (model weights from W, EMA weights equal to them, optimizer state zero).",
       {{"o", "FILE", "the safetensors file to write"}, kSeed, kInitFrom, kUpkern},
       false},
      {"run",
       "medrun run X.medc [--func NAME] [--input [NAME=]FILE.npy]... [--params P]\n"
       "           [--weights model|ema] [--out DIR] [--precision f32|f64|bf16|f16] [--seed S]\n"
       "           [--threads N] [--profile] [--save-params FILE] [--device cpu|cuda]",
       "Runs a function on the CPU backend (or the CUDA backend: artifacts compiled with\n"
       "`medc compile --target cuda`) and writes each output as DIR/NAME.npy (out0, ...,\n"
       "and grad.<parameter> for gradient functions).",
       {kFunc,
        kInput,
        kParams,
        kWeights,
        {"out", "DIR", "where outputs go (default: current directory)"},
        {"precision", "P",
         "f32 (default), f64, or bf16/f16 for a function compiled bf16-mixed or\n"
         "fp16-mixed (each value stored as the plan says: med-assign-storage); the\n"
         "CUDA backend always stores what the plan says"},
        {"device", "D", "cpu (default) or cuda"},
        kSeed,
        kThreads,
        kProfile,
        {"save-params", "F",
         "write the parameters and state after the function's updates (training\n"
         "steps assign new values) to safetensors file F"}},
       true},
      {"cuda-check",
       "medrun cuda-check X.medc [--func NAME] [--input ...] [--params P] [--weights W]\n"
       "           [--seed S] [--repeat N] [--tolerance T] [--profile]",
       "Runs a function on the CPU and the CUDA backend (a CUDA driver and GPU needed) with\n"
       "the same inputs (those not given drawn at random by their use: masks, class indices,\n"
       "...) and parameters and compares every output and every assigned parameter (relative\n"
       "error norm |cuda - cpu| / |cpu| <= T, default 1e-4); with --repeat N, N times, each\n"
       "backend continuing from its own updated parameters and the `step` input counting up\n"
       "(three training steps: --repeat 3). In a train_step, a parameter whose gradient\n"
       "vanishes (<loss>_grad on the CPU: norm <= 1e-2 T times the largest; a conv bias\n"
       "before an instance norm is zero exactly) holds rounding noise that AdamW turns into\n"
       "updates of up to lr: it and its EMA must agree to 2 sum_s lr B_s (medcheck's bound,\n"
       "`medcheck --help`), its moments be finite. Every other parameter and its EMA are\n"
       "judged after each element's difference is reduced by how far AdamW can amplify a\n"
       "gradient difference of T times the gradient's RMS (small or cancelling gradients;\n"
       "the bound is in AdamDrift.h). Prints a FAIL line per failing value and\n"
       "a summary; exits 1 on any failure. --fusions checks instead every function\n"
       "fusion_check_<k> (`medc compile --fusion-checks`): each runs one fused kernel on\n"
       "random inputs, so a wrong fused kernel is found in isolation.",
       {kFunc,
        {"fusions", "", "check each fused kernel alone (the artifact's fusion_check_<k>)"},
        kInput,
        kParams,
        kWeights,
        kSeed,
        kThreads,
        {"repeat", "N", "runs, each continuing from the last one's parameters (default 1)"},
        {"tolerance", "T", "largest relative error norm that passes (default 1e-4)"},
        kProfile},
       true},
      {"dist-check", "medrun dist-check [--gpus N] [--count N] [--iterations N] [--pause MS]",
       "Checks a data-parallel launch: each rank (from torchrun's, srun's or mpirun's variables,\n"
       "or --gpus N) opens GPU LOCAL_RANK, meets rank 0 at MASTER_ADDR, joins the NCCL\n"
       "communicator and all-reduces a buffer of N f32 and N bf16 elements whose exact sum it\n"
       "knows; prints a line per rank (docs/distributed.md). Exits 1 naming the rank and the\n"
       "cause when a rank is missing, wrong or dies.",
       {kGpus,
        {"count", "N", "elements per all-reduce (default 1048576)"},
        {"iterations", "N", "all-reduces of each type (default 3)"},
        {"pause", "MS", "milliseconds between iterations (default 0)"}},
       false}};
  return table;
}

const char *kEnvironment =
    R"(Environment: MEDC (the medc executable; default: beside medrun, then PATH),
MEDRUN_CACHE (compiled recipes and cuDNN's chosen algorithms; default ~/.cache/medrun),
MEDRUN_CUDNN (benchmark, the default: measure cuDNN's algorithms once per shape, and
for 1x1x1 convolutions cuBLASLt's too, for forward and backward-data convolutions the
generated kernels too, keeping the fastest; deterministic and heuristic:
1x1x1 convolutions through cuBLASLt's first heuristic algorithm, the others as cuDNN
chooses; off: the generated convolution kernels), MEDRUN_CUBLASLT=off (1x1x1
convolutions through cuDNN too; cuBLASLt is libcublasLt.so.13, else .so.12),
MEDRUN_MMA (auto, the default: run the faster of a fused kernel's mma.sync form and its
sm_90a wgmma variant, measured once per kernel and GPU; mma.sync; wgmma),
MEDRUN_CUDA_NO_GRAPH=1 (launch kernels one by one instead of one CUDA graph per step),
MEDRUN_CUDA_NO_PREFETCH=1 (upload each batch at its step instead of copying the next one,
from pinned host memory, on a second stream while the current step runs),
MEDRUN_CUDA_SYNC=1 (synchronize after each launch, to find the kernel of an asynchronous
error)
)";

/// Options every command takes.
const std::vector<Option> kCommon = {
    {"help", "", "this text; `medrun COMMAND --help`: that command's usage and options"},
    {"version", "", "the version, the git commit and the GPU libraries found"}};

/// "  --name VALUE       help" with the help's further lines aligned below its first.
std::string optionLines(const Option &o) {
  std::string head = fmt::format("{}{} {}", std::strlen(o.name) == 1 ? "-" : "--", o.name, o.value);
  std::string out, line;
  std::istringstream help(o.help);
  bool first = true;
  if (head.size() > 18) {
    out += fmt::format("  {}\n", head);
    first = false;
  }
  while (std::getline(help, line)) {
    out += fmt::format("  {:<18} {}\n", first ? head : "", line);
    first = false;
  }
  return out;
}

/// "  <usage>\n      <summary>", indented as the usage section shows a command.
std::string commandUsage(const Command &c) {
  std::string out = fmt::format("  {}\n", c.usage), line;
  std::istringstream summary(c.summary);
  while (std::getline(summary, line))
    out += fmt::format("      {}\n", line);
  return out;
}

std::string usage(const Command *command) {
  std::string out;
  if (!command) {
    out = "medrun: runs artifacts compiled by medc\n\nUsage:\n";
    for (const Command &c : commands())
      out += commandUsage(c);
    out += "\nRun `medrun COMMAND --help` for a command's options.\n\nOptions:\n";
    for (const Option &o : kCommon)
      out += optionLines(o);
    return out + "\n" + kEnvironment;
  }
  out = "Usage:\n" + commandUsage(*command) + "\nOptions:\n";
  for (const Option &o : command->options)
    out += optionLines(o);
  for (const Option &o : kCommon)
    out += optionLines(o);
  return command->environment ? out + "\n" + kEnvironment : out;
}

const Command *findCommand(const std::string &name) {
  for (const Command &c : commands())
    if (name == c.name)
      return &c;
  return nullptr;
}

// "(expected train, bench, ... or dist-check)", from the command table.
std::string expectedCommands() {
  std::string names;
  const std::vector<Command> &all = commands();
  for (size_t i = 0; i < all.size(); ++i)
    names += (i == 0 ? "" : i + 1 == all.size() ? " or " : ", ") + std::string(all[i].name);
  return "(expected " + names + ")";
}

Args parseArgs(int argc, char **argv) {
  // The command comes first; its table says which options take a value.
  Args args;
  std::vector<std::string> positional;
  for (int i = 1; i < argc && !args.command; ++i)
    if (argv[i][0] != '-')
      args.command = findCommand(argv[i]);
  auto find = [&](const std::string &key) -> const Option * {
    for (const std::vector<Option> *list : {&kCommon, args.command ? &args.command->options : nullptr})
      if (list)
        for (const Option &o : *list)
          if (key == o.name)
            return &o;
    return nullptr;
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.size() > 1 && a[0] == '-') {
      std::string key = a.substr(a[1] == '-' ? 2 : 1), value;
      bool inline_ = false;
      if (size_t eq = key.find('='); eq != std::string::npos) {
        value = key.substr(eq + 1);
        key = key.substr(0, eq);
        inline_ = true;
      }
      const Option *o = find(key);
      if (!o && args.command)
        throw Error(str("`medrun ", args.command->name, "` has no option --", key,
                        " (see medrun ", args.command->name, " --help)"));
      if (!o && key != "help" && key != "version")
        throw Error(str("unknown option --", key, " (see --help)"));
      std::string kind = o ? o->value : "";
      if (inline_ || kind.empty()) {
        // a flag, or a value given as --key=value
      } else if (kind.front() == '[' && (i + 1 >= argc || argv[i + 1][0] == '-')) {
        // an optional value left out (--resume alone: the run's own latest checkpoint)
      } else {
        if (i + 1 >= argc)
          throw Error(str("option --", key, " needs a value"));
        value = argv[++i];
      }
      args.options[key].push_back(value);
    } else {
      positional.push_back(a);
    }
  }
  if (args.has("help") || args.has("version")) {
    if (!args.command && !positional.empty())
      throw Error(str("unknown command '", positional[0], "' ", expectedCommands()));
    return args;
  }
  if (positional.size() != (args.is("dist-check") ? 1u : 2u))
    throw Error("expected a command and its file, e.g. `medrun train configs/quickstart.yaml` or "
                "`medrun run model.medc` (see --help)");
  if (!args.command)
    throw Error(str("unknown command '", positional[0], "' ", expectedCommands()));
  if (positional.size() > 1)
    args.artifact = positional[1];
  return args;
}

int info(const Artifact &a) {
  fmt::print("{}: {}, from {}\n", a.path, a.compiler, a.source);
  for (const Function &f : a.functions) {
    std::string launches;
    if (f.cuda)
      launches = fmt::format(", {} CUDA kernel launches",
                             std::count_if(f.cuda->steps.begin(), f.cuda->steps.end(),
                                           [](const CudaStep &s) {
                                             return s.kind == CudaStep::Kind::Launch;
                                           }));
    fmt::print("function {} ({} ops{})\n", f.name, f.ops.size(), launches);
    for (size_t i = 0; i < f.inputs.size(); ++i) {
      std::string arg = fmt::format("arg{}", i);
      fmt::print("  {}  {}{}\n", arg, f.inputNames[i] == arg ? "" : f.inputNames[i] + "  ",
                 typeStr(f.values[f.inputs[i]]));
    }
    for (size_t i = 0; i < f.outputs.size(); ++i)
      fmt::print("  {}  {}\n", f.outputNames[i], typeStr(f.values[f.outputs[i]]));
  }
  // The parameter table: model parameters, then the state a training step keeps (optimizer
  // moments, EMA), which is not trainable.
  size_t width = std::string("name").size(), shapeWidth = std::string("shape").size();
  for (const ParameterInfo &p : a.parameters) {
    width = std::max(width, p.name.size());
    shapeWidth = std::max(shapeWidth, shapeStr(p.shape).size());
  }
  if (!a.parameters.empty())
    fmt::print("parameters:\n  {:<{}}  {:<{}}  {:<5}  {}\n", "name", width, "shape", shapeWidth,
               "dtype", "trainable");
  int64_t count = 0, trainable = 0, trainableElements = 0, bytes = 0;
  for (const ParameterInfo &p : a.parameters) {
    fmt::print("  {:<{}}  {:<{}}  {:<5}  {}\n", p.name, width, shapeStr(p.shape), shapeWidth,
               dtypeName(p.dtype), p.trainable ? "yes" : "no");
    count += numElements(p.shape);
    bytes += numElements(p.shape) * static_cast<int64_t>(dtypeSize(p.dtype));
    trainable += p.trainable;
    trainableElements += p.trainable ? numElements(p.shape) : 0;
  }
  fmt::print("{} parameters, {} elements ({:.1f} MiB); {} trainable, {} elements\n",
             a.parameters.size(), count, bytes / 1048576.0, trainable, trainableElements);
  if (a.cuda) {
    size_t cubin = 0, ptx = 0;
    for (const CudaModule &m : a.cuda->modules) {
      cubin += m.cubin.size();
      ptx += m.ptx.size();
    }
    fmt::print("cuda: {} kernels, {} launches; {} cubin {} bytes, PTX {} bytes (NVRTC {}); "
               "{} module{}\n",
               a.cuda->kernels, a.cuda->launches, a.cuda->arch, cubin, ptx, a.cuda->nvrtc,
               a.cuda->modules.size(), a.cuda->modules.size() == 1 ? "" : "s");
  }
  // What medrun bench divides by the time (runtime/include/medrun/Flops.h): FLOPs as medc
  // stats counts them, bytes of every operand and result.
  for (const Function &f : a.functions) {
    FunctionCost cost = functionCost(f);
    fmt::print("cost {}: {:.0f} FLOP, {:.0f} bytes of operands and results\n", f.name,
               cost.total.flops, cost.total.bytes);
  }
  return 0;
}

int init(const Artifact &a, const Args &args) {
  std::string out = args.get("o");
  if (out.empty())
    throw Error("`medrun init` needs -o PARAMS.safetensors");
  TensorMap params = initParameters(a, parseSeed(args));
  if (args.has("upkern") && !args.has("init-from"))
    throw Error("--upkern resizes the kernels of --init-from W; give --init-from too");
  if (args.has("init-from"))
    initFromFile(a, params, args.get("init-from"), args.has("upkern"), stdout);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const ParameterInfo &p : a.parameters)
    tensors.emplace_back(p.name, params.at(p.name));
  writeSafetensors(out, tensors, {{"source", a.source}, {"seed", args.get("seed", "0")}});
  std::cout << "wrote " << tensors.size() << " parameters to " << out << "\n";
  return 0;
}

int run(const Artifact &a, const Args &args) {
  setThreads(args);
  const Function &fn = selectFunction(a, args);
  std::vector<Tensor> inputs = readInputs(fn, args);
  TensorMap params = readParams(a, fn, args);
  std::string device = args.get("device", "cpu");
  if (device != "cpu" && device != "cuda")
    throw Error(str("--device: expected cpu or cuda, got '", device, "'"));

  Precision precision = parsePrecision(args.get("precision", "f32"));
  if (device == "cuda" && precision != Precision::F32)
    throw Error("--device cuda runs f32 only (the CUDA backend has no other precision yet)");
  std::map<std::string, double> profile;
  TensorMap updates;
  std::vector<Tensor> outputs;
  std::unique_ptr<CudaSession> session;
  if (device == "cuda")
    session = std::make_unique<CudaSession>(a); // module load stays out of the timing
  auto start = std::chrono::steady_clock::now();
  if (session)
    outputs = session->run(fn, inputs, params, args.has("profile") ? &profile : nullptr,
                           &updates);
  else
    outputs = runCpu(a, fn, inputs, params, precision,
                     args.has("profile") ? &profile : nullptr, &updates);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::filesystem::path dir = args.get("out", ".");
  std::filesystem::create_directories(dir);
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor t = outputs[i].dtype() == DType::BF16 ? outputs[i].to(DType::F32) : outputs[i];
    std::filesystem::path file = dir / (fn.outputNames[i] + ".npy");
    writeNpy(file.string(), t);
    std::cout << fn.outputNames[i] << "  " << shapeStr(t.shape()) << "  -> " << file.string()
              << "\n";
  }
  if (std::string path = args.get("save-params"); !path.empty()) {
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const ParameterInfo &p : a.parameters) {
      auto u = updates.find(p.name);
      auto given = params.find(p.name);
      if (u == updates.end() && given == params.end())
        continue; // not read by the function and not in --params
      const Tensor &t = u != updates.end() ? u->second : given->second;
      tensors.emplace_back(p.name, t.dtype() == p.dtype ? t : t.to(p.dtype));
    }
    writeSafetensors(path, tensors, {{"source", a.source}});
    std::cout << "wrote " << tensors.size() << " parameters (" << updates.size()
              << " updated) to " << path << "\n";
  } else if (!updates.empty()) {
    std::cout << "note: " << fn.name << " updated " << updates.size()
              << " parameters; --save-params FILE keeps them\n";
  }
  if (session)
    std::fprintf(stdout, "%s: %.3f s on %s%s\n", fn.name.c_str(), seconds,
                 session->deviceName().c_str(), session->loadedFromPtx() ? " (from PTX)" : "");
  else
    std::fprintf(stdout, "%s: %.3f s on %d threads\n", fn.name.c_str(), seconds, numThreads());
  for (auto &[kind, t] : profile)
    std::fprintf(stdout, "  %-20s %8.3f s  %5.1f%%\n", kind.c_str(), t, 100 * t / seconds);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  try {
    Args args = parseArgs(argc, argv);
    if (args.has("help")) {
      std::cout << usage(args.command);
      return 0;
    }
    if (args.has("version")) {
      medtool::VersionLines lines = {
          {"artifact format",
           Artifact::kOldestFormatVersion == Artifact::kFormatVersion
               ? str("reads version ", Artifact::kFormatVersion)
               : str("reads versions ", Artifact::kOldestFormatVersion, " to ",
                     Artifact::kFormatVersion)}};
      for (auto &line : gpuLibraryVersions())
        lines.push_back(line);
      std::cout << medtool::versionText("medrun", lines);
      return 0;
    }
    if (args.has("gpus")) {
      // This command line once per rank, without --gpus.
      std::vector<std::string> rest;
      for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--gpus" || a == "-gpus")
          ++i;
        else if (a.rfind("--gpus=", 0) != 0)
          rest.push_back(a);
      }
      return launchLocalRanks(static_cast<int>(parseCount(args, "gpus", 1, 1)), rest);
    }
    if (args.is("dist-check")) {
      DistCheckOptions o;
      o.count = static_cast<size_t>(parseCount(args, "count", static_cast<int64_t>(o.count), 1));
      o.iterations = static_cast<int>(parseCount(args, "iterations", o.iterations, 1));
      o.pauseMs = static_cast<int>(parseCount(args, "pause", 0, 0));
      return distCheck(distEnvFromEnvironment(), o);
    }
    if (args.is("train")) {
      std::vector<std::string> overrides = args.all("set");
      for (const char *key : {"steps", "out", "device", "nan", "threads"})
        for (const std::string &v : args.all(key))
          overrides.push_back(str("train.", key, "=", v));
      for (const std::string &v : args.all("fold"))
        overrides.push_back(str("data.fold=", v));
      std::optional<std::string> resume;
      if (args.has("resume"))
        resume = args.get("resume");
      const bool resumeOrStart = args.has("resume-or-start");
      if (resumeOrStart && resume)
        throw Error("--resume-or-start already resumes the run's latest checkpoint; give "
                    "--resume CKPT or --resume-or-start, not both");
      if (resumeOrStart)
        resume = "";
      std::string progress = args.get("progress", "auto");
      if (progress != "auto" && progress != "bar" && progress != "lines")
        throw Error(str("--progress: expected auto, bar or lines, got '", progress, "'"));
      const std::string initFrom = args.get("init-from");
      if (args.has("upkern") && initFrom.empty())
        throw Error("--upkern resizes the kernels of --init-from W; give --init-from too");
      if (!initFrom.empty() && args.has("resume"))
        throw Error("--init-from starts a run from other weights; --resume continues a run "
                    "from its own checkpoint: give one of them");
      return trainCommand(args.artifact, overrides, resume, resumeOrStart,
                          args.has("overwrite"),
                          progress == "auto" ? 0 : progress == "bar" ? 1 : 2,
                          args.get("artifact"), initFrom, args.has("upkern"),
                          args.has("data-parallel"));
    }
    if (args.is("bench")) {
      std::vector<std::string> overrides = args.all("set");
      for (const char *key : {"device", "threads"})
        for (const std::string &v : args.all(key))
          overrides.push_back(str("train.", key, "=", v));
      if (std::string d = args.get("device", "auto"); d != "cpu" && d != "cuda" && d != "auto")
        throw Error(str("--device: expected cpu, cuda or auto, got '", d, "'"));
      BenchOptions options;
      options.steps = parseCount(args, "steps", 20, 1);
      options.warmup = parseCount(args, "warmup", 3, 0);
      options.json = args.get("json");
      options.roofline = args.get("roofline");
      options.dataParallel = args.has("data-parallel");
      rooflineFor(options.roofline, ""); // a malformed value fails before any work
      return benchCommand(args.artifact, overrides, args.get("artifact"), options);
    }
    if (args.is("augment-preview")) {
      std::vector<std::string> overrides = args.all("set");
      for (const std::string &v : args.all("device"))
        overrides.push_back(str("train.device=", v));
      if (std::string d = args.get("device", "auto"); d != "cpu" && d != "cuda" && d != "auto")
        throw Error(str("--device: expected cpu, cuda or auto, got '", d, "'"));
      AugmentPreviewOptions o;
      o.samples = parseCount(args, "samples", 4, 1);
      o.step = parseCount(args, "step", 0, 0);
      // An artifact given without the pipeline fails before the recipe is read.
      if (std::string given = args.get("artifact"); !given.empty()) {
        Artifact a = Artifact::load(given);
        bool found = false;
        for (const Function &f : a.functions)
          found = found || f.name == "augment";
        if (!found)
          throw Error(str(given, ": the artifact has no function @augment (compiled from a "
                                 "recipe without `augment:`, or by an older medc); give the "
                                 "recipe's artifact (`medc compile --recipe ", args.artifact, "`)"));
      }
      PreparedRecipe prepared;
      if (int rc = prepareRecipe(args.artifact, overrides, args.get("artifact"), prepared); rc != 0)
        return rc;
      augmentFunction(prepared.artifact, prepared.config); // the recipe has augment:, A has it
      std::string out = args.get("out");
      if (out.empty()) {
        std::string runDir = prepared.config["train"].value("out", "");
        if (runDir.empty())
          runDir = (std::filesystem::path("runs") / std::filesystem::path(args.artifact).stem()).string();
        out = (std::filesystem::path(runDir) / "augment-preview").string();
      }
      o.out = out;
      o.cuda = prepared.cuda;
      std::vector<nlohmann::json> lines = augmentPreview(prepared.artifact, prepared.config, o);
      for (const nlohmann::json &line : lines)
        std::cout << line.dump() << "\n";
      std::cout << "wrote " << lines.size() << " samples to " << out << "\n";
      return 0;
    }
    if (args.is("export")) {
      ExportOptions o;
      o.input = args.artifact;
      o.out = args.get("o");
      o.weights = args.get("weights");
      o.which = args.get("which");
      o.artifact = args.get("artifact");
      return exportCommand(o);
    }
    if (args.is("plan")) {
      setThreads(args);
      PlanCommandOptions o;
      o.dataset = args.artifact;
      o.out = args.get("o");
      o.nnunetPlans = args.get("nnunet-plans");
      const std::string gb = args.get("gpu-memory", "8");
      try {
        size_t used = 0;
        o.gpuMemoryGb = std::stod(gb, &used);
        if (used != gb.size())
          o.gpuMemoryGb = -1;
      } catch (...) {
        o.gpuMemoryGb = -1;
      }
      if (!(o.gpuMemoryGb > 0))
        throw Error(str("--gpu-memory: expected a positive number of GB, got '", gb, "'"));
      o.progress = parseProgress(args);
      return planCommand(o);
    }
    if (args.is("preprocess")) {
      setThreads(args);
      PreprocessOptions o;
      o.dataset = args.artifact;
      o.out = args.get("o");
      o.plans = args.get("plans");
      o.progressMode = parseProgress(args);
      return preprocessCommand(o);
    }
    if (args.is("predict")) {
      PredictOptions o;
      o.input = args.artifact;
      o.out = args.get("o");
      o.runs = args.all("run");
      o.artifact = args.get("artifact");
      o.plans = args.get("plans");
      o.weights = args.get("weights");
      o.mirror = args.has("mirror");
      o.saveProbabilities = args.has("save-probabilities");
      o.overlap = parseOverlap(args);
      o.progress = parseProgress(args);
      return predictCommand(o);
    }
    if (args.is("volume"))
      return volumeCommand(args.artifact, args.get("box"), args.get("o"), args.has("json"),
                           args.has("channel") ? parseCount(args, "channel", 0, 0) : -1);
    if (args.is("segment"))
      return segmentCommand(args);
    if (args.is("eval")) {
      EvalOptions o;
      o.prediction = args.artifact;
      o.labels = args.get("labels");
      o.mode = args.get("mode", "auto");
      if (args.has("thresholds"))
        o.thresholds = parseThresholds(args.get("thresholds"));
      o.minSize = parseCount(args, "min-size", 0, 0);
      o.json = args.get("json");
      o.out = args.get("o");
      o.datasetJson = args.get("dataset-json");
      o.fileEnding = args.get("file-ending");
      o.skeletons = args.get("skeletons");
      o.tune = args.has("tune");
      o.params = args.get("params");
      o.saveParams = args.get("save-params");
      o.run = args.get("run");
      o.select = args.get("select");
      o.method = args.get("method");
      o.block = args.get("block");
      o.offsets = args.get("offsets");
      o.progress = parseProgress(args);
      return evalCommand(o);
    }
    if (args.is("infer")) {
      setThreads(args);
      InferOptions o;
      o.artifact = args.artifact;
      o.images = args.all("image");
      o.out = args.get("o");
      o.params = args.get("params");
      o.weights = args.get("weights");
      o.activation = args.get("activation");
      o.normalization = args.get("normalization");
      o.device = args.get("device", "cpu");
      o.mirror = args.has("mirror");
      o.overlap = parseOverlap(args);
      o.progress = parseProgress(args);
      parseInferBlockOptions(args, o);
      return inferCommand(o);
    }
    Artifact a = Artifact::load(args.artifact);
    if (args.is("info"))
      return info(a);
    if (args.is("init"))
      return init(a, args);
    if (args.is("cuda-check"))
      return cudaCheck(a, args);
    return run(a, args);
  } catch (const std::exception &e) {
    // One write: the ranks of a job share the terminal.
    std::cerr << std::string("medrun: ") + e.what() + "\n";
    return 1;
  }
}
