"""The synthetic training benchmark's models (peer side; torch only, imported late).

torchvision has no CPU wheel for this torch here, so ResNet-50 (He et al. 2015, the v1.5
layout torchvision uses: stride on the 3x3 convolution) is written out; it is what Horovod's
pytorch_synthetic_benchmark trains by default. `small_cnn` keeps the quick profile to seconds
on 2 cores while still moving a few hundred KiB of gradients per step.
"""

from __future__ import annotations

from typing import Any

MODELS = {"small_cnn": (3, 32, 10), "resnet50": (3, 224, 1000)}  # name -> (channels, side, classes)


def build(name: str, torch: Any) -> Any:
    nn = torch.nn
    if name == "small_cnn":
        return nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(64 * 8 * 8, 256),
            nn.ReLU(),
            nn.Linear(256, 10),
        )
    if name == "resnet50":
        return _resnet50(torch)
    raise ValueError(f"unknown model {name!r} (known: {', '.join(MODELS)})")


def _resnet50(torch: Any) -> Any:
    nn = torch.nn

    class Bottleneck(nn.Module):  # type: ignore[misc, name-defined]
        def __init__(self, cin: int, width: int, stride: int) -> None:
            super().__init__()
            cout = width * 4
            self.body = nn.Sequential(
                nn.Conv2d(cin, width, 1, bias=False),
                nn.BatchNorm2d(width),
                nn.ReLU(True),
                nn.Conv2d(width, width, 3, stride, 1, bias=False),
                nn.BatchNorm2d(width),
                nn.ReLU(True),
                nn.Conv2d(width, cout, 1, bias=False),
                nn.BatchNorm2d(cout),
            )
            self.skip = (
                nn.Identity()
                if stride == 1 and cin == cout
                else nn.Sequential(
                    nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
                )
            )
            self.relu = nn.ReLU(True)

        def forward(self, x: Any) -> Any:
            return self.relu(self.body(x) + self.skip(x))

    layers: list[Any] = [
        nn.Conv2d(3, 64, 7, 2, 3, bias=False),
        nn.BatchNorm2d(64),
        nn.ReLU(True),
        nn.MaxPool2d(3, 2, 1),
    ]
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000)]
    return nn.Sequential(*layers)
