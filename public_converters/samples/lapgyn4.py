"""A tiny LapGyn4 v1.2 in its native layout: the four subsets' class folders with a few 64x48 JPEG frames from
three cases (one per split), a frame filed under two action classes, ``Suturing_Other``, random-int count images."""

from pathlib import Path

from public_converters.samples._common import cut, noise_image, remove, rename, write_image, write_text


BASE = "LapGyn4_v1.2"
IMAGES = (
    "Surgical_Actions/Coagulation/c_1_v_1_f_10.jpg",
    "Surgical_Actions/Coagulation/c_1_v_1_f_11.jpg",
    "Surgical_Actions/Suction_Irrigation/c_1_v_1_f_11.jpg",  # the same frame in two classes
    "Surgical_Actions/Suturing/c_2_v_1_f_5.jpg",
    "Surgical_Actions/Cutting_HF/c_4_v_2_f_7.jpg",
    "Anatomical_Structures/Oviduct/c_2_v_1_f_30.jpg",
    "Anatomical_Structures/Uterus/c_1_v_3_f_2.jpg",
    "Actions_on_Anatomy/Suturing_Ovary/c_2_v_1_f_5.jpg",
    "Actions_on_Anatomy/Suturing_Other/c_4_v_1_f_9.jpg",
    "Instrument_Count/0/31.jpg",
    "Instrument_Count/2/21587.jpg",
    "Instrument_Count/3/512.jpg",
)


def write(root: Path) -> None:
    write_text(root / BASE / "Readme.txt", "LapGyn4 v1.2\nNo Train/Val/Test split\n")
    for relative in IMAGES:
        write_image(root / BASE / relative, noise_image(Path(relative).name))


BAD_INPUTS = {
    "missing_file": remove(f"{BASE}/Anatomical_Structures"),
    "truncated_image": cut(f"{BASE}/Surgical_Actions/Coagulation/c_1_v_1_f_10.jpg"),
    "malformed_row": rename(f"{BASE}/Surgical_Actions/Suturing/c_2_v_1_f_5.jpg", "c_2_v_1_frame_5.jpg"),
    "unknown_label": rename(f"{BASE}/Anatomical_Structures/Oviduct", "Ovidukt"),
}
